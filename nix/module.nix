# NixOS module: services.kubeunit.environments.<name> brings up a kubeunit environment at boot.
#
# Per environment, one oneshot service `kubeunit-<name>-setup.service` (wanted by multi-user.target,
# so it runs at boot and when `nixos-rebuild switch` adds or changes the environment) runs
# nix/lib.nix's setupScript:
#   kubeunit gen        the state dir in /var/lib/kubeunit/<name> (0700): keys are made here, at
#                       activation, never in the Nix store; later runs keep them
#   kubeunit install --runtime --now
#                       the units as `kubeunit install` writes them, into /run/systemd/system
#                       (/etc/systemd/system is the store's on NixOS), started as kubeunit-<name>.target
# or, for an environment with hostDir (a state dir rendered elsewhere: a host's dir of
# `kubeunit gen --out`, lib.mkState):
#   kubeunit import     hostDir into /var/lib/kubeunit/<name>, checked against its manifest, modes restored
#   kubeunit install --runtime, then systemctl start --no-block kubeunit-<name>.target (as at boot:
#                       the other hosts may not be up yet)
# Stopping the service (or removing the environment) runs `kubeunit uninstall --runtime`: the
# environment stops, its units go, its state dir stays.
#
# Not evaluated by NixOS here (no nixpkgs on the machines that test kubeunit): tests/it/nix.rs
# evaluates this file with a stand-in for nixpkgs' lib and pkgs (tests/nix/eval-module.nix), and
# runs setupScript, which holds every command it runs.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.kubeunit;
  kubeunitLib = import ./lib.nix;

  # One directory with every component binary (the profile's binDir).
  binDir = pkgs.symlinkJoin {
    name = "kubeunit-components";
    paths = [ cfg.kubernetesPackage cfg.etcdPackage ] ++ cfg.extraPackages;
  } + "/bin";

  environment = { name, ... }: {
    options = {
      profile = lib.mkOption {
        type = with lib.types; nullOr (oneOf [ str path (attrsOf anything) ]);
        default = null;
        example = lib.literalExpression ''{ extends = "control-plane"; network.serviceCIDR = "10.97.0.0/16"; }'';
        description = ''
          A built-in profile name (`kubeunit profile list`), a path to a YAML profile, or an
          attribute set written as the profile (it may `extends` a built-in one). Null:
          `control-plane`, unless `hostDir` is given.
        '';
      };
      hostDir = lib.mkOption {
        type = with lib.types; nullOr path;
        default = null;
        example = lib.literalExpression ''kubeunit.lib.mkState { inherit kubeunit; profile = "ha"; host = "cp-1"; seed = 7; epoch = 1767225600; }'';
        description = ''
          A state dir rendered elsewhere, imported instead of generated: one host's dir of
          `kubeunit gen --out DIR` (`DIR/HOST`) or of `lib.mkState`/`lib.mkHostDirs`, of an
          environment named `<name>` and rendered for this one's stateDir (`--state-dir
          /var/lib/kubeunit/<name>`). At activation `kubeunit import` checks it against its
          manifest and restores its modes, then its units are installed and
          `kubeunit-<name>.target` is started without waiting for it, as at boot.
          Excludes `profile`, `settings` and `seed`.

          It holds the environment's keys. A derivation or a Nix path (which is copied there) is
          in the world-readable Nix store: for test machines only. A string naming a directory on
          the machine that is outside the store (put there by your deployment) keeps them out.
        '';
      };
      settings = lib.mkOption {
        type = with lib.types; attrsOf (oneOf [ str int bool (listOf str) ]);
        default = { };
        example = { "ports.apiserver" = 7443; "logging.verbosity" = 4; };
        description = "Profile fields by dotted key, as `kubeunit gen --set KEY=VALUE`.";
      };
      seed = lib.mkOption {
        type = with lib.types; nullOr int;
        default = null;
        description = ''
          Derive every key from this seed. Anyone who can read the NixOS configuration (the store
          is world-readable) can then derive the keys too: for test machines only.
        '';
      };
      stateDir = lib.mkOption {
        type = lib.types.str;
        default = "/var/lib/kubeunit/${name}";
        readOnly = true;
        description = "The environment's state dir (keys, kubeconfigs, units; mode 0700).";
      };
    };
  };
in
{
  options.services.kubeunit = {
    package = lib.mkOption {
      type = lib.types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = lib.literalExpression "pkgs.callPackage ./package.nix { }";
      description = "The kubeunit package.";
    };
    kubernetesPackage = lib.mkOption {
      type = lib.types.package;
      default = pkgs.kubernetes;
      defaultText = lib.literalExpression "pkgs.kubernetes";
      description = "Provides bin/kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy.";
    };
    etcdPackage = lib.mkOption {
      type = lib.types.package;
      default = pkgs.etcd;
      defaultText = lib.literalExpression "pkgs.etcd";
      description = "Provides bin/etcd (and etcdctl, etcdutl for snapshots).";
    };
    extraPackages = lib.mkOption {
      type = with lib.types; listOf package;
      default = [ ];
      example = lib.literalExpression "[ pkgs.containerd ]";
      description = "More component binaries for binDir (containerd for a node).";
    };
    environments = lib.mkOption {
      type = lib.types.attrsOf (lib.types.submodule environment);
      default = { };
      example = lib.literalExpression ''{ dev = { profile = "control-plane"; settings."logging.verbosity" = 2; }; }'';
      description = "Environments to generate, install and start at boot, by name.";
    };
  };

  config = lib.mkIf (cfg.environments != { }) {
    assertions = lib.mapAttrsToList (name: env:
      let
        generating = lib.optional (env.profile != null) "profile"
          ++ lib.optional (env.settings != { }) "settings"
          ++ lib.optional (env.seed != null) "seed";
        n = builtins.length generating;
        given = if n < 2 then lib.concatStringsSep "" generating
          else lib.concatStringsSep ", " (builtins.genList (builtins.elemAt generating) (n - 1))
            + " and " + builtins.elemAt generating (n - 1);
      in
      {
        assertion = env.hostDir == null || generating == [ ];
        message = "services.kubeunit.environments.${name}: give hostDir or ${given}, not both: "
          + "hostDir is a state dir rendered elsewhere, imported as it is, where profile, settings "
          + "and seed generate one at activation.";
      }) cfg.environments;

    environment.systemPackages = [ cfg.package ];

    systemd.services = lib.mapAttrs' (name: env:
      let
        script = kubeunitLib.setupScript ({
          kubeunit = lib.getExe cfg.package;
          inherit name;
          inherit (env) stateDir;
        } // (if env.hostDir != null then {
          # The host dir names its binaries (the binDir it was rendered with).
          inherit (env) hostDir;
        } else {
          inherit binDir;
          inherit (env) profile settings seed;
        }));
      in
      lib.nameValuePair "kubeunit-${name}-setup" {
        description = "kubeunit environment ${name}: ${if env.hostDir != null then "import" else "generate"}, install and start";
        wantedBy = [ "multi-user.target" ];
        wants = [ "network-online.target" ];
        after = [ "network-online.target" ];
        # The scripts are store paths: a changed environment changes the unit, and switching
        # restarts it (stop: uninstall; start: gen keeps the keys, or import, install, start).
        serviceConfig = {
          Type = "oneshot";
          RemainAfterExit = true;
          TimeoutStartSec = "10min";
          ExecStart = pkgs.writeShellScript "kubeunit-${name}-setup" script.start;
          ExecStop = pkgs.writeShellScript "kubeunit-${name}-teardown" script.stop;
        };
      }) cfg.environments;
  };
}
