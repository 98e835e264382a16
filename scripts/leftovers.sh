#!/usr/bin/env bash
# What test runs and the scripts' environments leave on this machine, and its removal. scripts/test.sh cleans
# before its tests (what a run killed with SIGTERM or SIGKILL left, saying what it found) and checks after
# them (the run fails naming each leftover).
#
#   scripts/leftovers.sh list     each leftover, one a line: KIND NAME (what it is)
#   scripts/leftovers.sh clean    remove each, one a line: "removed KIND NAME"; exit 1 when some remain
#   scripts/leftovers.sh check    exit 1 naming each leftover; silent and exit 0 when there is none
#
# Leftovers are, by the names the harness and kubeunit give them (tests/it/common, src/spec/plan.rs):
#   process    the suite's own processes of an earlier run (test-areas.sh, the test binary `it-*`), then
#              qemu (tests/it/common/vm.rs), systemd-nspawn and every Kubernetes, etcd or node process
#              (a container's processes show on this host: its PID namespace is a child of this one), the
#              simulated internet's servers (tests/it/common/internet.rs)
#   container  a systemd container of scripts/container.sh (its run dir under /run/kubeunit-containers)
#   netns      a network namespace: kubeunit-* (a node's, a container's) or ku-inet-* (a simulated internet)
#   link       ku-* (a node's link, the hosts' bridge ku-hosts, a simulated internet's veth), kl-* and kb-*
#              (a load balancer's link and segment), kc<12 hex> (a container's veth), kut-* (a VM's tap)
#   rule       a policy routing rule into an environment's own table (`iif ku-...`, node-network's)
#   route      a route to a network the tests use (scripts/test-networks.py) but the lowest-priority reject
#              routes scripts/lib.sh's keep_test_networks_local adds on purpose (`test.sh` removes those last)
#   mount      a mount under /tmp/kubeunit-it, /run/kubeunit-containers, /var/lib/kubeunit-hosts, or a
#              namespace's under /run/netns
#   iptables   the suite's leak counter chain (KU-SUITE-LEAK), left by a run killed before its check, and a
#              registry cache's filter (KU-RC-*, with its INPUT and OUTPUT rules "... registry cache NAME"),
#              left by a container killed before its cache's ExecStopPost= (it shares this host's network)
#   cgroup     a frozen freezer cgroup of a container (cgroup v1): runc's "unable to freeze" can leave one
#              FROZEN with a `runc init` in it, which then blocks its container's shutdown
# Work dirs of failed tests under /tmp/kubeunit-it stay: they hold what a failure is read from.
#
# Run it only when no test run and no environment of scripts/up.sh should be running: `clean` stops them all.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
run_dir=${KUBEUNIT_CONTAINERS_DIR:-/run/kubeunit-containers}

die() { echo "leftovers: $*" >&2; exit 2; }

# Processes by name (comm, 15 characters at most) and by command line.
proc_names='^(qemu-system-x86|systemd-nspawn|systemd-shutdow|runc|runc:\[[0-9]:[A-Z]+\]|etcd|kube-apiserver|kube-controller|kube-scheduler|kubelet|kube-proxy|containerd|containerd-shim|coredns|registry|metrics-server|local-path-prov|controller|speaker|traefik|e2e.test|ginkgo|kube-bench)$'
# The suite's own: an earlier test-areas.sh, the integration test binary (target/*/deps/it-HASH) and the
# simulated internet's Python server.
proc_args='(scripts/test-areas\.sh|/deps/it-[0-9a-f]{16}( |$)|sim_http\.py)'
netns_names='^(kubeunit-|ku-inet-)'
link_names='^(ku-[^ ]+|kl-[^ ]+|kb-[^ ]+|kc[0-9a-f]{12}|kut-[^ ]+)$'
mount_dirs='^(/tmp/kubeunit-it/|/run/kubeunit-containers/|/var/lib/kubeunit-hosts/|/run/netns/(kubeunit-|ku-inet-))'

# PIDs of this script and its ancestors: never leftovers (test.sh runs it).
own_pids() {
  local p=$$
  while [ -n "$p" ] && [ "$p" != 0 ]; do
    echo "$p"
    p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null || true)
  done
}

processes() {
  local own d pid comm args
  own=" $(own_pids | tr '\n' ' ') "
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    case $own in *" $pid "*) continue ;; esac
    # A process may end between the listing and these reads.
    comm=$( { cat "$d/comm"; } 2>/dev/null) || continue
    args=$( { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
    [ -n "$args" ] || continue # a kernel thread
    if [[ $comm =~ $proc_names ]] || [[ $args =~ $proc_args ]]; then
      # The dev container's and the hosts' processes are children of their nspawn: named through it.
      printf 'process %s (%s)\n' "$pid" "${args:0:120}"
    fi
  done
}

containers() {
  local d name
  for d in "$run_dir"/*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    printf 'container %s (%s)\n' "$name" "$d"
  done
}

namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "$netns_names" | sed 's/^/netns /' || true; }

links() {
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "$link_names" |
    sed 's/^/link /' || true
}

# Routes into a test network (or one inside it), or through a test link, but the reject guards
# (`unreachable NET ... metric 4294967295`).
routes() {
  local nets family
  nets=$(test_networks | paste -sd' ')
  for family in -4 -6; do
    ip "$family" route show table all 2>/dev/null | grep -v '^unreachable .* metric 4294967295' |
      grep -v '^local \|^broadcast \|^multicast \|^anycast \|^default ' |
      NETS=$nets FAMILY=$family python3 -c '
import ipaddress, os, re, sys
nets = [ipaddress.ip_network(n, strict=False) for n in os.environ["NETS"].split()]
for line in sys.stdin:
    line = line.strip()
    word = line.split()[0]
    if word in ("unreachable", "prohibit", "blackhole", "throw"):
        word = line.split()[1]
    try:
        dest = ipaddress.ip_network(word, strict=False)
    except ValueError:
        continue
    inside = any(dest.version == n.version and dest.subnet_of(n) for n in nets)
    if inside or re.search(r"dev (ku-|kl-|kb-|kut-|kc[0-9a-f]{12}\b)", line):
        print("route %s (ip %s route: %s)" % (word, os.environ["FAMILY"], line))
'
  done
}

# Rules that send what comes in on a test link to a table of its own: left when a container's node-network
# could not remove them (a rule outlives its link, "[detached]").
rules() {
  local family
  for family in -4 -6; do
    ip "$family" rule show 2>/dev/null | grep -E 'iif (ku-|kl-|kb-|kut-|kc[0-9a-f]{12})' |
      sed "s/^/rule $family /" || true
  done
}

mounts() {
  findmnt -rn -o TARGET 2>/dev/null | grep -E "$mount_dirs" | sort -r | sed 's/^/mount /' || true
}

chains() {
  local tool
  for tool in iptables ip6tables; do
    "$tool" -t mangle -n -L KU-SUITE-LEAK >/dev/null 2>&1 && echo "iptables KU-SUITE-LEAK ($tool -t mangle)"
  done
  command -v iptables >/dev/null 2>&1 || return 0
  iptables -w -S 2>/dev/null | sed -n 's/^-N \(KU-RC-[^ ]*\)$/iptables \1 (a registry cache'"'"'s filter)/p'
  iptables -w -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT) .*registry cache' | sed 's/^/iptables-rule /' || true
}

# A registry cache's filter: its rules in INPUT and OUTPUT (by their comment), then its chain.
remove_cache_filters() {
  local rule chain
  while read -r rule; do
    eval "iptables -w -D ${rule#-A }" 2>/dev/null || true
    echo "removed iptables-rule $rule"
  done < <(iptables -w -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT) .*registry cache' || true)
  while read -r chain; do
    iptables -w -F "$chain" 2>/dev/null && iptables -w -X "$chain" 2>/dev/null || true
    echo "removed iptables $chain"
  done < <(iptables -w -S 2>/dev/null | sed -n 's/^-N \(KU-RC-[^ ]*\)$/\1/p')
}

# Frozen freezer cgroups of containers, and the cgroups of containers that are gone (systemd-nspawn removes
# them when it ends cleanly; container.sh stop does after a kill).
cgroups() {
  local f d name
  # (No such dir on a machine that never ran a container: no error, pipefail would end the script.)
  { find /sys/fs/cgroup/freezer/kubeunit-containers -name freezer.state 2>/dev/null || true; } | while read -r f; do
    [ "$(cat "$f" 2>/dev/null)" = THAWED ] || echo "cgroup ${f%/freezer.state} ($(cat "$f" 2>/dev/null))"
  done
  for d in /sys/fs/cgroup/*/kubeunit-containers/*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    [ -d "$run_dir/$name" ] || echo "cgroup ${d%/} (of a container that is gone)"
  done
}

list() { processes; containers; namespaces; links; routes; rules; mounts; chains; cgroups; }

# Removal, in an order that lets each step do its part: the suite's processes first (no test starts another
# container meanwhile), the containers by their own stop (systemd stops its units: links, routes and
# namespaces go with them), then whatever a killed container or qemu left.
clean() {
  local line kind name
  # A frozen cgroup's processes take no signal until it thaws.
  while read -r kind name what; do
    [ "$what" = "(FROZEN)" ] || [ "$what" = "(FREEZING)" ] || continue
    echo THAWED >"$name/freezer.state" 2>/dev/null || true
    echo "removed cgroup $name (thawed)"
  done < <(cgroups)
  while read -r line; do
    name=${line#process }
    name=${name%% *}
    case $line in *scripts/test-areas.sh* | */deps/it-*) ;; *) continue ;; esac
    kill -9 "$name" 2>/dev/null && echo "removed $line"
  done < <(processes)
  while read -r kind name _; do
    "$here/container.sh" stop "$name" >/dev/null 2>&1 || true
    rmdir "$run_dir/$name" 2>/dev/null || true
    echo "removed container $name (powered off)"
  done < <(containers)
  while read -r line; do
    name=${line#process }
    name=${name%% *}
    kill -9 "$name" 2>/dev/null && echo "removed $line"
  done < <(processes)
  sleep 0.5 # the killed processes' namespaces and links go with their last process
  while read -r kind name _; do
    umount "$name" 2>/dev/null || umount -l "$name" 2>/dev/null || true
    echo "removed mount $name"
  done < <(mounts)
  while read -r kind name _; do
    ip netns del "$name" 2>/dev/null || true
    rm -rf "/etc/netns/$name"
    echo "removed netns $name"
  done < <(namespaces)
  while read -r kind name _; do
    ip link del "$name" 2>/dev/null || true
    echo "removed link $name"
  done < <(links)
  while read -r line; do
    local family dest
    family=$(sed -n 's/.*(ip \(-[46]\) route: .*/\1/p' <<<"$line")
    dest=$(sed -n 's/.*(ip -[46] route: \(.*\))$/\1/p' <<<"$line")
    # shellcheck disable=SC2086 # the route as ip printed it, word by word
    ip "$family" route del $dest 2>/dev/null || true
    echo "removed ${line%% (*}"
  done < <(routes)
  while read -r _ family pref rest; do
    # "32000:	from all iif ku-x lookup 123 [detached]": deleted by its priority and selector.
    rest=${rest% \[detached\]}
    # shellcheck disable=SC2086 # the rule as ip printed it, word by word
    ip "$family" rule del pref "${pref%:}" $rest 2>/dev/null || true
    echo "removed rule ${pref%:} $rest"
  done < <(rules)
  while read -r kind name what; do
    case $what in *"that is gone"*) find "$name" -depth -type d -exec rmdir {} + 2>/dev/null || true
      echo "removed cgroup $name" ;; esac
  done < <(cgroups)
  if [ -n "$(chains | grep -F KU-SUITE-LEAK)" ]; then
    leak_counter stop
    echo "removed iptables KU-SUITE-LEAK"
  fi
  ! command -v iptables >/dev/null 2>&1 || remove_cache_filters
  local left
  left=$(list)
  [ -z "$left" ] || { printf 'leftovers: still there after clean:\n%s\n' "$left" >&2; return 1; }
}

case ${1:-} in
  list) list ;;
  clean) clean ;;
  check)
    left=$(list)
    [ -z "$left" ] || { printf 'leftovers: the run left these behind (scripts/leftovers.sh clean removes them):\n%s\n' "$left" | sed '2,$s/^/  /' >&2; exit 1; }
    ;;
  *) sed -n '2,25s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
