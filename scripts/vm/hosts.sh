#!/bin/sh
# vmtest-hosts (scripts/vm/hosts.sh, run by the VM's /init in the hosts
# boot): two network namespaces as two hosts, h1 and h2, each with its own
# UTS namespace (gotune groups launcher processes into nodes by host name),
# one end of a veth pair (10.9.1.1 and 10.9.1.2) and an rxe device on it
# (rxe1, rxe2; rxe0 stays in the initial namespace on veth0). RDMA devices
# are shared by every namespace: each gotune takes the device whose GID is
# on its own namespace's interface (transports/ib pickPort), with no ib.dev.
#
# gotune runs as srun -N2 --ntasks-per-node=1 would start it: one process
# per host with Slurm's variables set by hand and a shared rendezvous
# directory, --launcher srun. Jobs: bench -t ib -p bw --validate across the
# eager limit and by rendezvous (read and write), then a sweep with
# /etc/hosts-plan.yaml whose profile must carry decisions.internode (its
# transport goes on the status line, "internode=ib", through
# /tmp/vmtest.notes), and bench --profile routing the pair by it.
IP=/bin/ip
cd /tmp || exit 1
failed=""
fail() { echo "hosts: FAIL: $*"; failed="$failed $1"; }

# host NAME: a process holding new network and UTS namespaces with host
# name NAME; its pid goes to $HOST_PID once the name is set.
host() {
	unshare -n -u sh -c "hostname $1 && exec sleep 100000" &
	HOST_PID=$!
	n=0
	until [ "$(nsenter -t $HOST_PID -u hostname 2>/dev/null)" = "$1" ]; do
		n=$((n + 1))
		[ $n -lt 100 ] || { echo "hosts: $1 did not come up"; return 1; }
		sleep 0.1
	done
}
host h1 && H1=$HOST_PID && host h2 && H2=$HOST_PID || { fail setup; exit 1; }
$IP link add veth2 type veth peer name veth3 &&
	$IP link set veth2 netns $H1 && $IP link set veth3 netns $H2 || { fail veth; exit 1; }
# rdma link add runs inside the namespace that holds the netdev.
# MTU 9000 on the veths: rxe's path MTU is then 4096, not 1024, a quarter
# of the packets, each with its UDP header and software ICRC.
MTU=9000
nsenter -t $H1 -n sh -c "$IP link set lo up && $IP link set veth2 mtu $MTU && $IP addr add 10.9.1.1/24 dev veth2 && $IP link set veth2 up && rdma link add rxe1 type rxe netdev veth2" &&
	nsenter -t $H2 -n sh -c "$IP link set lo up && $IP link set veth3 mtu $MTU && $IP addr add 10.9.1.2/24 dev veth3 && $IP link set veth3 up && rdma link add rxe2 type rxe netdev veth3" ||
	{ fail rxe; exit 1; }
echo "== namespace-hosts"
for h in $H1 $H2; do
	nsenter -t $h -n -u sh -c 'echo "$(hostname): $('$IP' -4 -o addr show scope global | awk "{print \$2, \$4}"), rdma link: $(rdma link | grep netdev)"'
done
rdma system
nsenter -t $H1 -n ibv_devinfo -d rxe1 | grep -E 'hca_id|state|active_mtu'

job=0
# job ARGS...: gotune ARGS --launcher srun on both hosts, as srun starts
# one task per node; rank 0 (h1) coordinates. Output of both is printed.
job() {
	job=$((job + 1))
	t0=$(cut -d' ' -f1 /proc/uptime)
	mkdir -p /tmp/rendezvous
	echo "== job $job: gotune $* --launcher srun (SLURM_PROCID 0 on h1, 1 on h2)"
	nsenter -t $H1 -n -u env SLURM_PROCID=0 SLURM_NODEID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_STEP_TASKS_PER_NODE="1(x2)" SLURM_JOB_ID=$job SLURM_STEP_ID=0 \
		GOTUNE_RENDEZVOUS=/tmp/rendezvous timeout 400 gotune "$@" --launcher srun >/tmp/job$job.h1 2>&1 &
	p0=$!
	nsenter -t $H2 -n -u env SLURM_PROCID=1 SLURM_NODEID=1 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_STEP_TASKS_PER_NODE="1(x2)" SLURM_JOB_ID=$job SLURM_STEP_ID=0 \
		GOTUNE_RENDEZVOUS=/tmp/rendezvous timeout 400 gotune "$@" --launcher srun >/tmp/job$job.h2 2>&1 &
	p1=$!
	wait $p0
	r0=$?
	wait $p1
	r1=$?
	echo "-- job $job took $(awk -v a=$t0 '{printf "%.0f", $1-a}' /proc/uptime) s"
	echo "-- h1 (launcher rank 0): exit $r0"
	cat /tmp/job$job.h1
	echo "-- h2 (launcher rank 1): exit $r1"
	cat /tmp/job$job.h2
	[ $r0 = 0 ] && [ $r1 = 0 ] && grep -q 'on 2 node(s): h1, h2' /tmp/job$job.h1
}

# Across the eager limit (8K: 8191 8192 eager, 8193 rendezvous) and well
# into rendezvous, every payload checked; short passes: emulated.
bench="bench -t ib -p bw --validate -s 1,8191,8192,8193,64K,1M --reps 1 --iters 2 --warmup 1 --window 4 --settle 0 -q"
for rndv in read write; do
	job $bench --opt ib.rndv=$rndv || fail "bench-ib-$rndv"
done

if job sweep --plan /etc/hosts-plan.yaml --out /tmp/results; then
	profile=$(ls /tmp/results/h1/*/profile.yaml 2>/dev/null | head -1)
	if [ -z "$profile" ]; then
		fail "sweep-no-profile"
	else
		echo "== $profile: decisions.internode"
		sed -n '/^  internode:/,/^  [a-z]/p' "$profile" | sed '$d'
		echo "== gotune profile show (abridged)"
		gotune profile show "$profile" 2>&1 | grep -iA12 'inter-node\|internode' | head -40
		echo "== the sweep's summary: inter-node stages"
		grep -iA8 'internode' "${profile%/*}/summary" | head -60
		tr=$(sed -n '/^  internode:/,/^  [a-z]/p' "$profile" | awk '$1 == "transport:" || $2 == "transport:" {print $NF; exit}')
		case $tr in
		ib | tcp) echo "internode=$tr" >> /tmp/vmtest.notes ;;
		*) fail "sweep-no-internode-decision" ;;
		esac
		# The runtime routes the pair across hosts by the profile (auto):
		# the alloc pattern, its allocator hooked through auto, validated.
		job bench --profile "$profile" -p alloc --validate -s 8,64K,1M --reps 1 --iters 3 --warmup 1 --window 4 --settle 0 -q --opt alloc.purge=immediate ||
			fail "bench-profile"
	fi
else
	fail sweep
fi
[ -z "$failed" ]
