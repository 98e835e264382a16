#!/usr/bin/env python3
"""Write a one-layer docker-archive image tar, byte-reproducibly (for `ctr -n k8s.io images import`).

    docker-archive.py OUT.tar --ref REF [--ref REF]... --arch amd64 [--entrypoint JSON] [--cmd JSON] [--user U]
                      [--env K=V]... [--workdir DIR] [--label K=V]... [--expose PORT[/PROTO]]...
                      [--stop-signal SIG] [--tree DIR]... [--owner PATH:UID:GID]...
                      [--dir PATH:MODE]... [--file SRC:PATH:MODE]... [--symlink PATH:TARGET]...

The archive holds manifest.json (Config, RepoTags, Layers), the image config <sha256>.json and the layer
<diff_id>/layer.tar. Every tar entry has mtime 0, owner 0:0 (numeric, no names) unless --owner says
otherwise, and entries are sorted, so the same inputs always give the same bytes; the config's
rootfs.diff_ids is the layer tar's sha256.

--tree DIR adds everything under DIR (DIR itself is the image's /): directories, regular files and
symlinks with their permission bits (setuid, setgid and sticky included); a file with several names in
DIR (hard links) is stored once, under its first name in sorted order, the others as hard links to it.
Other file types (devices, fifos, sockets) are refused. --owner PATH:UID:GID sets the numeric owner of
one entry (of a tree or given by --dir/--file/--symlink). The config keys of --workdir (WorkingDir),
--label (Labels), --expose (ExposedPorts, /tcp unless given) and --stop-signal (StopSignal) are written
only when given.
"""
import argparse
import hashlib
import io
import json
import os
import stat
import sys
import tarfile


def entry(name, kind, mode, size=0, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.linkname = linkname
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def tar_bytes(members):
    """members: list of (TarInfo, bytes or None), written sorted by name."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in sorted(members, key=lambda m: m[0].name):
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def layer(args):
    members, seen = [], set()

    def add(info, data=None):
        if info.name in seen:
            sys.exit(f"docker-archive: {info.name} given twice")
        seen.add(info.name)
        members.append((info, data))

    def parents(path):
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in seen:
                add(entry(d, tarfile.DIRTYPE, 0o755))

    for root in args.tree:
        tree(root, add)
    for spec in args.dir:
        path, mode = spec.rsplit(":", 1)
        path = path.strip("/")
        parents(path)
        add(entry(path, tarfile.DIRTYPE, int(mode, 8)))
    for spec in args.file:
        src, path, mode = spec.rsplit(":", 2)
        path = path.strip("/")
        with open(src, "rb") as f:
            data = f.read()
        parents(path)
        add(entry(path, tarfile.REGTYPE, int(mode, 8), len(data)), data)
    for spec in args.symlink:
        path, target = spec.split(":", 1)
        path = path.strip("/")
        parents(path)
        add(entry(path, tarfile.SYMTYPE, 0o777, linkname=target))
    owners = {}
    for spec in args.owner:
        path, uid, gid = spec.rsplit(":", 2)
        owners[path.strip("/")] = (int(uid), int(gid))
    for info, _ in members:
        if info.name in owners:
            info.uid, info.gid = owners.pop(info.name)
    if owners:
        sys.exit(f"docker-archive: --owner for paths not in the image: {', '.join(sorted(owners))}")
    return tar_bytes(members)


def tree(root, add):
    """Add everything under root (the image's /), sorted; hard links after their first name."""
    first = {}  # (st_dev, st_ino) -> name of the first entry
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for n in dirnames + sorted(filenames):
            paths.append(os.path.join(dirpath, n))
    for full in sorted(paths, key=lambda p: os.path.relpath(p, root)):
        name = os.path.relpath(full, root)
        st = os.lstat(full)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            add(entry(name, tarfile.DIRTYPE, mode))
        elif stat.S_ISLNK(st.st_mode):
            add(entry(name, tarfile.SYMTYPE, 0o777, linkname=os.readlink(full)))
        elif stat.S_ISREG(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and key in first:
                add(entry(name, tarfile.LNKTYPE, mode, linkname=first[key]))
                continue
            first[key] = name
            with open(full, "rb") as f:
                data = f.read()
            add(entry(name, tarfile.REGTYPE, mode, len(data)), data)
        else:
            sys.exit(f"docker-archive: {full}: not a directory, regular file or symlink")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--ref", required=True, action="append",
                   help="image reference (RepoTags), e.g. registry.k8s.io/pause:3.10.2; again for another name")
    p.add_argument("--arch", required=True, help="OCI/Go architecture name, e.g. amd64")
    p.add_argument("--entrypoint", type=json.loads)
    p.add_argument("--cmd", type=json.loads)
    p.add_argument("--user")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--dir", action="append", default=[])
    p.add_argument("--file", action="append", default=[])
    p.add_argument("--symlink", action="append", default=[])
    p.add_argument("--tree", action="append", default=[], help="a directory tree to add as the image's /")
    p.add_argument("--owner", action="append", default=[], help="PATH:UID:GID, the numeric owner of an entry")
    p.add_argument("--workdir")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--expose", action="append", default=[], help="PORT or PORT/PROTO (ExposedPorts)")
    p.add_argument("--stop-signal")
    args = p.parse_args()

    layer_tar = layer(args)
    diff_id = hashlib.sha256(layer_tar).hexdigest()
    config = {"Env": args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
    if args.entrypoint is not None:
        config["Entrypoint"] = args.entrypoint
    if args.cmd is not None:
        config["Cmd"] = args.cmd
    if args.user:
        config["User"] = args.user
    if args.workdir:
        config["WorkingDir"] = args.workdir
    if args.label:
        config["Labels"] = dict(kv.split("=", 1) for kv in args.label)
    if args.expose:
        config["ExposedPorts"] = {(p if "/" in p else p + "/tcp"): {} for p in args.expose}
    if args.stop_signal:
        config["StopSignal"] = args.stop_signal
    image_config = {
        "architecture": args.arch,
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/docker-archive.py"}],
    }
    config_json = json.dumps(image_config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_json).hexdigest() + ".json"
    layer_name = diff_id + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": args.ref, "Layers": [layer_name]}]
    manifest_json = json.dumps(manifest, separators=(",", ":")).encode()

    members = [
        (entry("manifest.json", tarfile.REGTYPE, 0o644, len(manifest_json)), manifest_json),
        (entry(config_name, tarfile.REGTYPE, 0o644, len(config_json)), config_json),
        (entry(diff_id, tarfile.DIRTYPE, 0o755), None),
        (entry(layer_name, tarfile.REGTYPE, 0o644, len(layer_tar)), layer_tar),
    ]
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(tar_bytes(members))
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
