# kubeunit for Nix users without flakes (flake.nix exposes the same):
#   nix-build -A kubeunit                                   the package (needs <nixpkgs>)
#   (import ./. { }).lib.mkState { ... }                    a state dir as a derivation (no nixpkgs)
#   imports = [ (import ./. { }).nixosModules.kubeunit ];   the NixOS module
# nix/README.md has examples.
{ pkgs ? import <nixpkgs> { } }:
{
  kubeunit = pkgs.callPackage ./nix/package.nix { };
  lib = import ./nix/lib.nix;
  nixosModules.kubeunit = ./nix/module.nix;
}
