{
  description = "kubeunit: a real Kubernetes environment on one Linux host, run by systemd";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      packages = forAllSystems (pkgs: rec {
        kubeunit = pkgs.callPackage ./nix/package.nix { };
        default = kubeunit;
      });

      # Plain Nix (no nixpkgs): lib.mkState { kubeunit, profile, seed, epoch, settings, hostFacts, host },
      # lib.mkHostDirs (every host's state dir of a profile with hosts).
      lib = import ./nix/lib.nix;

      nixosModules.kubeunit = ./nix/module.nix;
      nixosModules.default = self.nixosModules.kubeunit;
    };
}
