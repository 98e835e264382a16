#!/usr/bin/env bash
# systemd as PID 1 in a systemd-nspawn container on the cached Debian rootfs (scripts/build-rootfs.sh),
# sharing the host network. The one implementation of booting, finding, entering and stopping such a
# container: scripts/systemd-host.sh (the dev container of scripts/up.sh) and the tests
# (tests/it/common/container.rs) use it. The rootfs is mounted with a volatile overlay, so containers never
# change it and several can run at once.
#
#   container.sh boot NAME [--node] [--persist=DIR] [--network=...] [--log=FILE] [--bind=DIR[:PATH] | --bind-ro=DIR ...]
#       Boot NAME unless it runs already and wait until its systemd is up (running or degraded); print
#       the host PID of its systemd. --bind directories are created first. nspawn's output goes to FILE
#       (default RUN/NAME/console.log, which stop deletes). On failure: the log's tail on stderr, the
#       container stopped, exit 1. --node: a container that can run a Kubernetes node (see node_flags).
#       --persist=DIR: what the container writes to its root survives a stop: an overlay whose upper
#       layer is DIR/upper (instead of a volatile one), so that booting again with the same DIR is a
#       reboot of the same machine.
#       --network=BRIDGE,ADDRESS/PREFIX,GATEWAY: a network of its own instead of the host's (a host of a test
#       across hosts): a network namespace whose eth0 has ADDRESS, on BRIDGE (see `bridge`) through a veth pair,
#       with its default route via GATEWAY; gone when the container stops or is killed.
#   container.sh kill NAME               cut its power: kill -9 its systemd, no shutdown; its network goes
#   container.sh bridge NAME ADDRESS/PREFIX   make the bridge NAME with ADDRESS unless it exists
#   container.sh unbridge NAME           delete the bridge NAME
#   container.sh leader NAME             host PID of NAME's systemd; exit 1 when NAME does not run
#   container.sh exec NAME [--] CMD...   run CMD inside NAME (mount, UTS, IPC and PID namespaces, root and
#                                        working directory of its systemd; the network is the host's, or
#                                        its own with --network)
#   container.sh stop NAME               power off; kill -9 its systemd when it has not stopped in time
#   container.sh cache-dir               the cache directory (kubeunit_cache of scripts/lib.sh)
#
# RUN is $KUBEUNIT_CONTAINERS_DIR (default /run/kubeunit-containers); RUN/NAME/nspawn.pid holds nspawn's
# PID. Timeouts: $KUBEUNIT_BOOT_TIMEOUT (120 s), $KUBEUNIT_STOP_TIMEOUT (30 s).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
run_dir=${KUBEUNIT_CONTAINERS_DIR:-/run/kubeunit-containers}
# nsenter into the container: every namespace of its systemd but the network (the host's, shared).
ns_flags=(-m -u -i -p -r -w)

# What a node (containerd, runc, CNI, kubelet, kube-proxy) needs of nspawn: every capability (iptables and
# the CNI bridge need NET_ADMIN and more) and the keyring system calls nspawn's seccomp filter blocks (runc
# joins a session keyring).
node_flags=(--capability=all "--system-call-filter=add_key keyctl request_key")
# ... and inside, once systemd is up: nspawn mounts the cgroup controllers and /proc/sys read-only (the
# kubelet writes both), and there is no /dev/kmsg (the kubelet reads it; kind links it the same way).
# shellcheck disable=SC2016 # expanded inside the container
node_setup='mount -o remount,rw /sys/fs/cgroup
for d in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$d" 2>/dev/null || mount -o remount,rw "$d"; done
mount -o remount,bind,rw /proc/sys
[ -e /dev/kmsg ] || ln -s /dev/console /dev/kmsg'

die() { echo "container.sh: $*" >&2; exit 1; }

# A container's own network (--network): its namespace and the host's end of its veth pair, by its name.
netns_of() { echo "kubeunit-ct-$1"; }
veth_of() { printf 'kc%s' "$(printf '%s' "$1" | sha256sum | cut -c1-12)"; }

# Make NAME's namespace and link: BRIDGE,ADDRESS/PREFIX,GATEWAY.
network_up() {
  local name=$1 spec=$2 bridge address gateway ns veth
  IFS=, read -r bridge address gateway <<<"$spec"
  if [ -z "$bridge" ] || [ -z "$address" ] || [ -z "$gateway" ]; then die "boot $name: --network=BRIDGE,ADDRESS/PREFIX,GATEWAY"; fi
  [ -d "/sys/class/net/$bridge/bridge" ] || die "boot $name: no bridge $bridge (container.sh bridge $bridge ADDRESS/PREFIX)"
  ns=$(netns_of "$name")
  veth=$(veth_of "$name")
  network_down "$name"
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$bridge" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$address" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "$gateway"
  echo "$ns" >"$run_dir/$name/netns"
}

network_down() {
  local veth
  veth=$(veth_of "$1")
  [ ! -e "/sys/class/net/$veth" ] || ip link del "$veth" 2>/dev/null || true
  ip netns del "$(netns_of "$1")" 2>/dev/null || true
  rm -f "$run_dir/$1/netns"
}

cmd_bridge() {
  local name=${1:?bridge NAME ADDRESS/PREFIX} address=${2:?bridge NAME ADDRESS/PREFIX}
  if [ ! -d "/sys/class/net/$name" ]; then
    ip link add "$name" type bridge
    ip addr add "$address" dev "$name"
  fi
  ip link set "$name" up
}

cmd_unbridge() { ip link del "${1:?unbridge NAME}" 2>/dev/null || true; }
# Each container its own cgroup where systemd tracks units (the name=systemd and unified hierarchies, or
# the one v2 hierarchy). Without a host systemd, nspawn --keep-unit puts every container in its caller's
# cgroup: two containers' systemds would share one tree, and units of the same name one cgroup (one
# systemd then sees the other's processes in its unit and keeps it loaded, or signals them).
own_cgroups() {
  local name=$1 h
  if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup/kubeunit-containers/$name"
    return
  fi
  for h in systemd unified; do
    [ -d "/sys/fs/cgroup/$h" ] && echo "/sys/fs/cgroup/$h/kubeunit-containers/$name"
  done
  # And in every other v1 controller, below the cgroup this script runs in (a sandbox's memory limit
  # stays above it): otherwise every container sees the same controller cgroups, and the systemds of
  # containers running environments of one name (the hosts of scripts/up-hosts.sh) make and remove
  # the same slices there, under each other's pods.
  local ctrl path
  while IFS=: read -r _ ctrl path; do
    case $ctrl in '' | name=*) continue ;; esac
    [ -d "/sys/fs/cgroup/$ctrl" ] || continue
    echo "/sys/fs/cgroup/$ctrl${path%/}/kubeunit-containers/$name"
  done </proc/self/cgroup
  return 0
}

# Make the cgroup dirs of own_cgroups; a cpuset one takes its parent's CPUs and memory nodes (a new
# cpuset has none, and takes no process).
make_cgroups() {
  local d p
  for d in "$@"; do
    mkdir -p "$d" || return 1
    case $d in
      /sys/fs/cgroup/cpuset/*)
        p=$(dirname "$d")
        for f in cpuset.cpus cpuset.mems; do
          [ -s "$p/$f" ] || cat "$(dirname "$p")/$f" >"$p/$f" 2>/dev/null || true
          [ -s "$d/$f" ] || cat "$p/$f" >"$d/$f" || return 1
        done
        ;;
    esac
  done
}

# PID runs and is not a zombie. Builtins only: `exec` runs this for every command a test sends.
alive() {
  local _pid _comm state _rest
  read -r _pid _comm state _rest 2>/dev/null <"/proc/$1/stat" || return 1
  [ "$state" != Z ] && [ "$state" != X ]
}

comm_of() { local c=""; read -r c 2>/dev/null <"/proc/$1/comm" || true; printf '%s' "$c"; }

# Sets NSPAWN to the PID of NAME's systemd-nspawn; fails when it does not run.
find_nspawn() {
  NSPAWN=""
  local p=""
  read -r p 2>/dev/null <"$run_dir/$1/nspawn.pid" || return 1
  [ -n "$p" ] && alive "$p" && [ "$(comm_of "$p")" = systemd-nspawn ] || return 1
  NSPAWN=$p
}

# Sets LEADER to the host PID of NAME's systemd (PID 1 inside); fails when there is none (yet).
find_leader() {
  LEADER=""
  find_nspawn "$1" || return 1
  # nspawn forks through an intermediate process: the leader is the child that runs systemd.
  local f kids pid
  for f in /proc/"$NSPAWN"/task/*/children; do
    kids=()
    read -r -a kids 2>/dev/null <"$f" || true
    for pid in "${kids[@]}"; do
      [ "$(comm_of "$pid")" = systemd ] && { LEADER=$pid; return 0; }
    done
  done
  return 1
}

# Registering a container (start + pid file) and forgetting one (pid file + run dir) hold this lock, so a
# stop never misses a container being started and never removes a run dir in use. Waits do not hold it.
lock() { mkdir -p "$run_dir"; exec {LOCK}>"$run_dir/.lock"; flock "$LOCK"; }
unlock() { exec {LOCK}>&-; }

# Every descendant of PID $1.
descendants() {
  local f kids k
  for f in /proc/"$1"/task/*/children; do
    kids=()
    read -r -a kids 2>/dev/null <"$f" || true
    for k in "${kids[@]}"; do echo "$k"; descendants "$k"; done
  done
}

# systemd's shutdown stops every process in the container (SIGSTOP, then SIGKILL, then SIGCONT). nsenter,
# outside, passes a stop of its child on to itself and then waits for a SIGCONT that never comes, so the
# killed child is never reaped and the container's PID 1 never exits. Continue such nsenters of leader $1.
continue_nsenters() {
  local d comm _pid _comm state _rest args
  for d in /proc/[0-9]*; do
    comm=""
    read -r comm 2>/dev/null <"$d/comm" || continue
    [ "$comm" = nsenter ] || continue
    read -r _pid _comm state _rest 2>/dev/null <"$d/stat" || continue
    [ "$state" = T ] || continue
    args=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
    case " $args" in *" -t $1 "*) kill -CONT "${d#/proc/}" 2>/dev/null || true ;; esac
  done
}

# Wait up to $2 seconds for PID $1 to end.
wait_gone() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    alive "$1" || return 0
    sleep 0.1
  done
  ! alive "$1"
}

# Forget containers whose nspawn is gone (a test process that was killed, a reboot).
prune() {
  local d
  for d in "$run_dir"/*/; do
    [ -f "$d/nspawn.pid" ] || continue
    if ! find_nspawn "$(basename "$d")"; then
      rm -f "$d/nspawn.pid"
      rmdir "$d" 2>/dev/null || true
    fi
  done
}

cmd_boot() {
  local name=${1:?boot NAME}
  shift
  local log="" binds=() node="" persist="" network="" a d
  for a in "$@"; do
    case $a in
      --node) node=1 ;;
      --persist=*) persist=${a#--persist=} ;;
      --network=*) network=${a#--network=} ;;
      --log=*) log=${a#--log=} ;;
      --bind=*) d=${a#--bind=}; mkdir -p "${d%%:*}"; binds+=("$a") ;;
      --bind-ro=*) binds+=("$a") ;;
      *) die "boot: unknown argument $a" ;;
    esac
  done
  [ -n "$log" ] || log=$run_dir/$name/console.log
  # Two boots of one name (two `scripts/up.sh` at once) start one container and both wait for it.
  lock
  if ! find_nspawn "$name"; then
    prune
    local rootfs
    rootfs=$("$here/build-rootfs.sh")
    mkdir -p "$run_dir/$name" "$(dirname "$log")"
    # setsid: the container outlives this script and a Ctrl-C in the terminal that started it.
    local extra=() root_flags=(--volatile=overlay -D "$rootfs")
    [ -z "$node" ] || extra=("${node_flags[@]}")
    if [ -n "$network" ]; then
      network_up "$name" "$network" || { unlock; die "boot $name: cannot make its network"; }
      extra+=("--network-namespace-path=/run/netns/$(netns_of "$name")")
    fi
    if [ -n "$persist" ]; then
      # nspawn's overlays are volatile or below /: the persistent one over / is mounted here, and
      # unmounted by stop.
      mkdir -p "$persist/upper" "$persist/work" "$persist/root"
      if [ -n "$node" ]; then
        # A machine that boots a node by itself (an installed environment) needs the node setup
        # before its units start, not once the boot is over: a unit of its own, early in the boot.
        mkdir -p "$persist/upper/usr/local/sbin" "$persist/upper/etc/systemd/system/sysinit.target.wants"
        printf '#!/bin/sh\nset -e\n%s\n' "$node_setup" >"$persist/upper/usr/local/sbin/kubeunit-node-setup"
        chmod 755 "$persist/upper/usr/local/sbin/kubeunit-node-setup"
        printf '%s\n' '[Unit]' 'Description=What a Kubernetes node needs of systemd-nspawn (scripts/container.sh)' \
          'DefaultDependencies=no' 'Before=sysinit.target' '' '[Service]' 'Type=oneshot' 'RemainAfterExit=yes' \
          'ExecStart=/usr/local/sbin/kubeunit-node-setup' '' '[Install]' 'WantedBy=sysinit.target' \
          >"$persist/upper/etc/systemd/system/kubeunit-node-setup.service"
        ln -sf ../kubeunit-node-setup.service \
          "$persist/upper/etc/systemd/system/sysinit.target.wants/kubeunit-node-setup.service"
      fi
      mountpoint -q "$persist/root" ||
        mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$persist/upper,workdir=$persist/work" \
          "$persist/root" || { unlock; die "boot $name: cannot mount the overlay in $persist"; }
      echo "$persist/root" >"$run_dir/$name/root"
      root_flags=(-D "$persist/root")
    fi
    local cgroups
    cgroups=$(own_cgroups "$name")
    # shellcheck disable=SC2086 # one path a word
    make_cgroups $cgroups || { unlock; die "boot $name: cannot make its cgroups"; }
    # stop removes these (its own cgroup may be another one).
    echo "$cgroups" >"$run_dir/$name/cgroups"
    # shellcheck disable=SC2016 # expanded by that shell
    KU_CGROUPS=$cgroups setsid sh -c 'for d in $KU_CGROUPS; do
        echo $$ >"$d/cgroup.procs" || exit 1
      done
      unset KU_CGROUPS
      exec "$@"' sh systemd-nspawn --quiet --boot --register=no --keep-unit \
      --machine="$name" "${root_flags[@]}" "${extra[@]}" "${binds[@]}" \
      </dev/null >"$log" 2>&1 {LOCK}>&- &
    local pid=$! i
    # Until setsid has exec'd it, the process is not systemd-nspawn yet (find_nspawn checks the name).
    for ((i = 0; i < 50; i++)); do
      [ "$(comm_of "$pid")" = systemd-nspawn ] || ! alive "$pid" && break
      sleep 0.1
    done
    disown "$pid"
    echo "$pid" >"$run_dir/$name/nspawn.pid"
  fi
  unlock

  local deadline=$((SECONDS + ${KUBEUNIT_BOOT_TIMEOUT:-120})) state="" why=""
  while :; do
    if find_leader "$name"; then
      # Degraded is fine: some units of a minimal rootfs fail in a container.
      state=$(timeout "$((deadline - SECONDS > 1 ? deadline - SECONDS : 1))" \
        nsenter -t "$LEADER" "${ns_flags[@]}" systemctl is-system-running --wait 2>/dev/null) || true
      case $state in
        running | degraded)
          if [ -n "$node" ] && ! why=$(nsenter -t "$LEADER" "${ns_flags[@]}" sh -ec "$node_setup" 2>&1); then
            why="node setup failed: $why"
            break
          fi
          echo "$LEADER"
          return 0
          ;;
      esac
    elif ! find_nspawn "$name"; then
      why="systemd-nspawn exited"
      break
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      why="not booted after ${KUBEUNIT_BOOT_TIMEOUT:-120}s (system state: ${state:-no systemd})"
      break
    fi
    sleep 0.1
  done
  {
    echo "container.sh: container $name did not boot: $why; the end of $log:"
    tail -n 40 "$log" 2>/dev/null || true
  } >&2
  cmd_stop "$name" >/dev/null 2>&1 || true
  return 1
}

cmd_leader() {
  find_leader "${1:?leader NAME}" || die "container ${1} is not running"
  echo "$LEADER"
}

cmd_exec() {
  local name=${1:?exec NAME -- CMD...}
  shift
  [ "${1:-}" = -- ] && shift
  [ $# -gt 0 ] || die "exec $name: no command"
  find_leader "$name" || die "container $name is not running"
  # A container with a network of its own: its network namespace too.
  [ ! -e "$run_dir/$name/netns" ] || ns_flags+=(-n)
  exec nsenter -t "$LEADER" "${ns_flags[@]}" -- "$@"
}

# Power cut: no shutdown, every process of the container killed at once (its PID 1 first, which
# ends its PID namespace), then what stop removes.
cmd_kill() {
  local name=${1:?kill NAME}
  KILL_NOW=1 cmd_stop "$name"
}

# runc's "unable to freeze" (cgroup v1 freezer, under load) can leave a cgroup of the container FROZEN with a
# `runc init` in it, which no signal reaches: the container's shutdown then waits for it for ever, and a kill
# leaves it behind. Thaw them, so that everything in the container can end.
thaw() {
  local f
  find /sys/fs/cgroup/freezer -path "*/kubeunit-containers/$1/*" -name freezer.state 2>/dev/null |
    while read -r f; do
      [ "$(cat "$f" 2>/dev/null)" = THAWED ] || echo THAWED >"$f" 2>/dev/null || true
    done
}

cmd_stop() {
  local name=${1:?stop NAME}
  lock
  find_nspawn "$name" || true
  unlock
  local nspawn=$NSPAWN
  if [ -n "$nspawn" ]; then
    local leader="" i
    # A container still starting gets a moment to run its systemd, which then powers off cleanly.
    for ((i = 0; i < 50; i++)); do
      find_leader "$name" || ! alive "$nspawn" && break
      sleep 0.1
    done
    if [ -n "$LEADER" ] && [ -n "${KILL_NOW:-}" ]; then
      leader=$LEADER
    elif [ -n "$LEADER" ]; then
      leader=$LEADER
      # Early in the boot systemctl cannot talk to systemd yet; SIGRTMIN+4 asks systemd to power off too.
      nsenter -t "$leader" "${ns_flags[@]}" systemctl poweroff --no-block >/dev/null 2>&1 ||
        kill -s RTMIN+4 "$leader" 2>/dev/null || true
      for ((i = 0; i < ${KUBEUNIT_STOP_TIMEOUT:-30} * 10; i++)); do
        alive "$nspawn" || break
        ((i % 10 != 5)) || { continue_nsenters "$leader"; thaw "$name"; }
        sleep 0.1
      done
    fi
    if alive "$nspawn"; then
      [ -n "${KILL_NOW:-}" ] || echo "container.sh: $name did not power off; killing it" >&2
      # Killing the container's PID 1 ends its whole PID namespace: no systemd is left behind
      # without its nspawn.
      thaw "$name"
      if [ -n "$leader" ]; then
        kill -9 "$leader" 2>/dev/null || true
        continue_nsenters "$leader"
      fi
      if ! wait_gone "$nspawn" 5; then
        # Still no systemd (killed mid-boot) or nspawn hangs: the whole tree, or the container's
        # processes would outlive their nspawn.
        local pids
        pids=$(descendants "$nspawn")
        # shellcheck disable=SC2086
        kill -9 "$nspawn" $pids 2>/dev/null || true
        wait_gone "$nspawn" 5 || die "$name: systemd-nspawn (pid $nspawn) does not end"
      fi
    fi
  fi
  lock
  # Unless a boot of the same name has registered a new container meanwhile.
  if ! find_nspawn "$name"; then
    local root=""
    read -r root 2>/dev/null <"$run_dir/$name/root" || true
    if [ -n "$root" ] && mountpoint -q "$root"; then
      umount "$root" || umount -l "$root" || true
    fi
    network_down "$name"
    local d cgroups
    cgroups=$(cat "$run_dir/$name/cgroups" 2>/dev/null || own_cgroups "$name")
    rm -f "$run_dir/$name/nspawn.pid" "$run_dir/$name/console.log" "$run_dir/$name/root" "$run_dir/$name/cgroups"
    rmdir "$run_dir/$name" 2>/dev/null || true
    for d in $cgroups; do
      if [ -d "$d" ]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    done
  fi
  unlock
}

case ${1:-} in
  boot | leader | exec | stop | kill | bridge | unbridge) sub=$1; shift; "cmd_$sub" "$@" ;;
  cache-dir) kubeunit_cache ;;
  *) sed -n '8,30s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
