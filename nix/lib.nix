# kubeunit's Nix library: plain Nix, no nixpkgs, so that the flake, default.nix, the NixOS module
# and the repository's tests (which have Nix but no nixpkgs) all run this same code.
let
  inherit (builtins)
    attrNames concatStringsSep filter isAttrs isInt isPath isString toFile toJSON;

  # A --set VALUE: strings as they are, everything else as JSON (which kubeunit reads as YAML).
  setValue = v: if isString v then v else toJSON v;

  # `settings` ({ "ports.apiserver" = 7443; }) as --set arguments, in key order.
  setArgs = settings:
    builtins.concatMap (k: [ "--set" "${k}=${setValue settings.${k}}" ]) (attrNames settings);

  # What --profile gets: a built-in name, a path (copied to the store) or an attribute set written
  # as JSON (a YAML document). An attribute set that names a derivation's output (a binary path)
  # cannot go through toFile: pass those as settings.
  profileArg = profile:
    if isAttrs profile then toFile "kubeunit-profile.yaml" (toJSON profile)
    else if isPath profile then "${profile}"
    else if isString profile then profile
    else throw "kubeunit: profile must be a built-in name, a path or an attribute set";

  # The environment's name, where the arguments tell it without reading a file.
  envName = { profile, settings }:
    settings.name or (
      if isAttrs profile then profile.name or profile.extends or null
      else if isString profile && builtins.match "[a-z0-9-]+" profile != null then profile
      else null);

  # Host facts mkState accepts, and the setting each becomes.
  hostFactSettings = hostFacts:
    let
      known = { advertiseAddress = "network.advertiseAddress"; };
      unknown = filter (k: !(known ? ${k})) (attrNames hostFacts);
    in
    if unknown != [ ] then
      throw "kubeunit.lib.mkState: unknown hostFacts ${toJSON unknown}; known: ${toJSON (attrNames known)}"
    else
      builtins.listToAttrs (map (k: { name = known.${k}; value = hostFacts.${k}; }) (attrNames hostFacts));

  # `kubeunit gen --hermetic ... --out $out` as a derivation: kubeunit is the builder, nothing else
  # runs, every input is an argument. `fn` names the caller in errors; `suffix` ends the name.
  hermeticGen =
    { fn, kubeunit, profile, seed, epoch, settings, stateDir, system, prefix, suffix ? "" }:
    let
      name = envName { inherit profile settings; };
      dir =
        if stateDir != null then stateDir
        else if name != null then "/var/lib/kubeunit/${name}"
        else throw "kubeunit.lib.${fn}: cannot tell the environment's name from this profile: give stateDir";
      epochText =
        if isInt epoch || isString epoch then toString epoch
        else throw "kubeunit.lib.${fn}: epoch must be Unix seconds or RFC 3339 text";
      seedText =
        if isInt seed then toString seed
        else throw "kubeunit.lib.${fn}: seed must be an integer (${fn} always derives its keys)";
      all = settings // { "pki.epoch" = epochText; };
    in
    builtins.derivation {
      name = "${prefix}${if name != null then "-${name}" else ""}${suffix}";
      inherit system;
      builder = "${kubeunit}/bin/kubeunit";
      # The output directory by placeholder: kubeunit writes it itself, no shell involved.
      args = [ "gen" "--hermetic" "--profile" (profileArg profile) "--seed" seedText
               "--state-dir" dir "--out" (builtins.placeholder "out") ]
             ++ setArgs all;
    };

  defaultSystem = kubeunit:
    if isAttrs kubeunit then kubeunit.system or builtins.currentSystem else builtins.currentSystem;
in
rec {
  /* A kubeunit state dir as a derivation: `kubeunit gen --hermetic` with every input explicit, so
     the output is the same bytes wherever and whenever it is built (`nix-build --check` agrees).

     WARNING: the output holds the environment's private keys (CAs, service-account key, the
     encryption key of Secrets), and the Nix store is world-readable. For tests and CI only; the
     NixOS module generates keys at activation instead, outside the store.

     Arguments:
       kubeunit   a package (or directory) with bin/kubeunit; it is the builder, nothing else runs
       profile    a built-in profile name ("control-plane"), a path to a YAML profile, or an
                  attribute set ({ extends = "control-plane"; name = "ci"; ... })
       seed       integer: every key is derived from it
       epoch      the certificates' start, RFC 3339 text or Unix seconds (never SOURCE_DATE_EPOCH)
       settings   { "dotted.key" = value; } given as --set (binary paths of derivations go here)
       hostFacts  what gen would otherwise read off the machine: { advertiseAddress = "10.0.0.5"; }
       host       for a profile with `hosts:`, the one host whose state dir this is ("cp-1"; as
                  `--set host=cp-1`): the same bytes as that host's dir of mkHostDirs, and only
                  that host's keys. Without it, such a profile gives every host's (mkHostDirs)
       stateDir   where `kubeunit import` puts it (units and configs name files there)
                  [default: /var/lib/kubeunit/NAME]
       system     [default: kubeunit's, else builtins.currentSystem]

     Use: kubeunit import $(nix-build ...) && kubeunit start --state-dir STATEDIR, or a NixOS
     machine's services.kubeunit.environments.NAME.hostDir */
  mkState =
    { kubeunit
    , profile
    , seed
    , epoch
    , settings ? { }
    , hostFacts ? { }
    , host ? null
    , stateDir ? null
    , system ? defaultSystem kubeunit
    }:
    let
      hostSettings =
        if host == null then { }
        else if !(isString host) || builtins.match "[A-Za-z0-9][A-Za-z0-9._-]*" host == null then
          throw "kubeunit.lib.mkState: host must be the name of one of the profile's hosts, such as \"cp-1\""
        else if settings ? host then
          throw "kubeunit.lib.mkState: give the host once: as host, not as settings.host"
        else { inherit host; };
    in
    hermeticGen {
      fn = "mkState";
      inherit kubeunit profile seed epoch stateDir system;
      settings = hostFactSettings hostFacts // settings // hostSettings;
      prefix = "kubeunit-state";
      suffix = if host != null then "-${host}" else "";
    };

  /* Every host's state dir of a profile with `hosts:`, as one derivation: the tree that
     `kubeunit gen --hermetic --out DIR` writes (DIR/HOST for each host), which `kubeunit hosts
     check` reads whole. Host HOST's dir is "${mkHostDirs { ... }}/HOST", the same bytes as
     `mkState { host = "HOST"; ... }` with the same arguments (which builds that host's alone).

     WARNING: as mkState's output, this holds private keys in the world-readable Nix store, here
     every host's: the control-plane hosts' CA keys among them. A machine's closure that names
     "${dirs}/worker-1" holds the whole tree, CA keys included; give a machine
     `mkState { host = ...; }` instead, which holds its own keys only. For tests and CI.

     Arguments: those of mkState but host and hostFacts (each host's address is the inventory's). */
  mkHostDirs =
    { kubeunit
    , profile
    , seed
    , epoch
    , settings ? { }
    , stateDir ? null
    , system ? defaultSystem kubeunit
    }:
    hermeticGen {
      fn = "mkHostDirs";
      inherit kubeunit profile seed epoch settings stateDir system;
      prefix = "kubeunit-hosts";
    };

  /* The commands the NixOS module's kubeunit-NAME.service runs at activation and boot, for one
     environment: its state dir generated there (keys stay in it, outside the store; a later run
     keeps them and reissues what changed), or a host dir rendered elsewhere imported (hostDir:
     checked against its manifest, modes restored); then its units installed into
     /run/systemd/system as `kubeunit install` writes them, and started. `stop` is what stopping
     that service runs. Plain text, so tests run it too.

     A generated environment starts as `install --now` does, waiting until it is healthy. An
     imported one starts as at boot, `systemctl start --no-block` of its target: a host of an
     environment across hosts comes up only once the other hosts are there (etcd's peers, the API
     servers), which `kubeunit start` would not wait for, and systemd restarts a component that
     gave up until they are (as `kubeunit hosts seed`'s first-boot script). */
  setupScript =
    { kubeunit        # path of the kubeunit binary
    , name            # environment name
    , profile ? null  # null: "control-plane"
    , settings ? { }
    , seed ? null
    , hostDir ? null  # a state dir rendered for stateDir (`gen --out`, mkState): imported, not generated
    , stateDir ? "/var/lib/kubeunit/${name}"
    , binDir ? null   # one directory with every component binary
    }:
    let
      q = a: "'" + builtins.replaceStrings [ "'" ] [ "'\\''" ] a + "'";
      line = args: concatStringsSep " " (map q args);
      sets = setArgs ({ inherit name; } // (if binDir != null then { inherit binDir; } else { }) // settings);
      gen = [ kubeunit "gen" "--profile" (profileArg (if profile != null then profile else "control-plane"))
              "--state-dir" stateDir ]
        ++ (if seed != null then [ "--seed" (toString seed) ] else [ ])
        ++ sets;
      generating = filter (k: k != null) [
        (if profile != null then "profile" else null)
        (if settings != { } then "settings" else null)
        (if seed != null then "seed" else null)
        (if binDir != null then "binDir" else null)
      ];
      hostDirText = "${hostDir}";
      commands =
        if hostDir == null then [
          (line gen)
          (line [ kubeunit "install" "--runtime" "--now" "--state-dir" stateDir "--kubeunit" kubeunit ])
        ]
        else if generating != [ ] then
          throw "kubeunit.lib.setupScript: environment '${name}' has a hostDir, which is imported as it was rendered, and ${concatStringsSep ", " generating}, which generate one: give one or the other"
        else if builtins.substring 0 1 hostDirText != "/" then
          throw "kubeunit.lib.setupScript: environment '${name}': hostDir ${toJSON hostDirText} is no absolute path"
        else [
          # The host dir may be a store path (every file 0444 there) or a directory on this
          # machine: the modes come from its manifest, and `"${hostDir}"` copies a Nix path
          # literal into the store first (where its keys are world-readable).
          (line [ kubeunit "import" hostDirText "--state-dir" stateDir ])
          (line [ kubeunit "install" "--runtime" "--state-dir" stateDir "--kubeunit" kubeunit ])
          # systemctl from PATH: NixOS puts systemd's bin/ on every service's.
          (line [ "systemctl" "start" "--no-block" "kubeunit-${name}.target" ])
        ];
    in
    {
      start = concatStringsSep "\n" ([ "set -eu" ] ++ commands ++ [ "" ]);
      stop = line [ kubeunit "uninstall" "--runtime" "--state-dir" stateDir ] + "\n";
    };
}
