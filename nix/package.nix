# The kubeunit binary, built by nixpkgs' rustPlatform from Cargo.lock (no network in the build).
# `callPackage ./nix/package.nix { }`. Untested here: these machines have no nixpkgs (nix/README.md).
{ lib, rustPlatform, pkg-config, openssl }:

let
  cargo = builtins.fromTOML (builtins.readFile ../Cargo.toml);
in
rustPlatform.buildRustPackage {
  pname = "kubeunit";
  inherit (cargo.package) version;

  # Only what the build reads: Cargo.toml declares the benches, and the binary embeds the
  # templates (units, configs, addons) and the built-in profiles.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../src
      ../addons
      ../configs
      ../units
      ../profiles
      ../benches
    ];
  };

  cargoLock.lockFile = ../Cargo.lock;

  # RSA key generation uses OpenSSL's prime test (src/pki/key.rs).
  nativeBuildInputs = [ pkg-config ];
  buildInputs = [ openssl ];

  # The tests need systemd as PID 1 and the pinned Kubernetes binaries: scripts/test.sh runs them.
  doCheck = false;

  meta = {
    description = cargo.package.description;
    license = lib.licenses.asl20;
    mainProgram = "kubeunit";
    platforms = lib.platforms.linux;
  };
}
