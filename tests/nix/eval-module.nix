# nix/module.nix evaluated as a NixOS configuration, without nixpkgs (which the machines that test
# kubeunit do not have): tests/it/nix.rs reads what this returns.
#
#   nix-instantiate --eval --strict --json tests/nix/eval-module.nix \
#     --arg configuration '{ services.kubeunit = { ... }; }' [--arg lib 'import NIXPKGS/lib']
#
# With `lib` (nixpkgs' lib, e.g. a checkout's `lib/`), NixOS's own module system evaluates it
# (lib.evalModules), with the few NixOS options the module sets declared here. Without, a
# stand-in does: the parts of nixpkgs' lib the module uses, and an evaluation that fills each
# option from the configuration or its default, checks its type, refuses unknown and read-only
# options and applies `mkIf`. Either way `pkgs` is a stand-in: `writeShellScript` gives the
# script's text instead of a file, `symlinkJoin` a path that is never built.
#
# Returns the configuration's systemd.services and environment.systemPackages. Failed assertions
# end the evaluation as NixOS ends a system's build: "Failed assertions:" and each message.
{ configuration, lib ? null }:

let
  inherit (builtins)
    all any attrNames concatStringsSep filter isAttrs isBool isInt isList isString mapAttrs
    substring toJSON typeOf;

  module = import ../../nix/module.nix;

  pkgs = {
    writeShellScript = name: text: { inherit name text; };
    symlinkJoin = { name, paths }: "/nix/store/00000000000000000000000000000000-${name}";
    callPackage = _: _: throw "eval-module.nix: no nixpkgs here: give services.kubeunit.package";
    kubernetes = throw "eval-module.nix: no nixpkgs here: give services.kubeunit.kubernetesPackage";
    etcd = throw "eval-module.nix: no nixpkgs here: give services.kubeunit.etcdPackage";
  };

  # The stand-in for nixpkgs' lib: what nix/module.nix calls, with types that check.
  standIn = rec {
    mkOption = o: o // { _type = "option"; };
    mkIf = condition: content: { _type = "if"; inherit condition content; };
    literalExpression = text: { _type = "literalExpression"; inherit text; };
    nameValuePair = name: value: { inherit name value; };
    mapAttrs' = f: set: builtins.listToAttrs (map (n: f n set.${n}) (attrNames set));
    mapAttrsToList = f: set: map (n: f n set.${n}) (attrNames set);
    optional = c: x: if c then [ x ] else [ ];
    inherit concatStringsSep;
    getExe = p: "${p}/bin/${p.meta.mainProgram}";
    types = rec {
      type = name: check: { inherit name check; };
      str = type "string" isString;
      int = type "signed integer" isInt;
      bool = type "boolean" isBool;
      anything = type "anything" (_: true);
      path = type "absolute path" (x:
        (isString x || builtins.isPath x || (isAttrs x && x ? outPath)) && substring 0 1 (toString x) == "/");
      package = type "package" (x: isAttrs x && x.type or null == "derivation");
      nullOr = t: type "null or ${t.name}" (x: x == null || t.check x);
      listOf = t: type "list of ${t.name}" (x: isList x && all t.check x);
      attrsOf = t: type "attribute set of ${t.name}" (x: isAttrs x && all (n: t.check x.${n}) (attrNames x))
        // { elemType = t; };
      oneOf = ts: type (concatStringsSep " or " (map (t: t.name) ts)) (x: any (t: t.check x) ts);
      submodule = f: type "submodule" isAttrs // { inherit f; };
    };
  };

  # Options (a tree of mkOption values) filled from `defs`, as the module system fills them.
  fill = path: options: defs:
    let
      unknown = filter (n: !(options ? ${n})) (attrNames defs);
      one = n: o:
        let
          where = "${path}.${n}";
          given = defs ? ${n};
          value = if given then defs.${n} else o.default or (throw "The option `${where}' is used but not defined.");
          sub = o.type.elemType.f or null;
        in
        if o.readOnly or false && given then throw "The option `${where}' is read-only, but it's set."
        else if !(o.type.check value) then
          throw "A definition for option `${where}' is not of type `${o.type.name}'. Definition value: ${toJSON value}"
        else if sub != null then mapAttrs (name: d: fill "${where}.${name}" (sub { inherit name; }).options d) value
        else value;
    in
    if unknown != [ ] then throw "The option `${path}.${builtins.head unknown}' does not exist."
    else mapAttrs (n: o: if o._type or null == "option" then one n o else fill "${path}.${n}" o (defs.${n} or { }))
      options;

  # The module's config with its `mkIf` applied (the module uses it at the top only).
  resolve = c: if c._type or null == "if" then (if c.condition then c.content else { }) else c;

  standInEval =
    let
      # The module reads services.kubeunit alone.
      m = module { config = options; inherit pkgs; lib = standIn; };
      options = {
        services.kubeunit = fill "services.kubeunit" m.options.services.kubeunit
          (configuration.services.kubeunit or { });
      };
    in
    if attrNames configuration != [ "services" ] || attrNames configuration.services != [ "kubeunit" ] then
      throw "eval-module.nix: the stand-in takes services.kubeunit only"
    else options // resolve m.config;

  # NixOS's module system, with the options the module sets declared as NixOS declares them
  # (types loosened: nothing else here reads them).
  nixosEval = (lib.evalModules {
    modules = [
      module
      configuration
      {
        options = {
          assertions = lib.mkOption { type = lib.types.listOf lib.types.unspecified; default = [ ]; };
          environment.systemPackages = lib.mkOption { type = lib.types.listOf lib.types.package; default = [ ]; };
          systemd.services = lib.mkOption { type = lib.types.attrsOf lib.types.anything; default = { }; };
        };
        config._module.args.pkgs = pkgs;
      }
    ];
  }).config;

  config = if lib == null then standInEval else nixosEval;
  failed = map (a: a.message) (filter (a: !a.assertion) (config.assertions or [ ]));
in
if failed != [ ] then
  throw "\nFailed assertions:\n${concatStringsSep "\n" (map (m: "- ${m}") failed)}"
else {
  evaluatedBy = if lib == null then "stand-in" else "nixpkgs lib ${lib.version or "?"}";
  services = config.systemd.services or { };
  systemPackages = map (p: "${p}") (config.environment.systemPackages or [ ]);
}
