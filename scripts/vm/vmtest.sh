#!/usr/bin/env bash
# vmtest.sh: boot Debian's own kernels under qemu (TCG: no KVM needed) with
# Soft-RoCE (rdma_rxe) and run gotune's verbs tests inside. Kernels and
# rdma-core's user space come from Debian's packages (apt-get download,
# cached under VM_CACHE); the test binaries are built here with go test -c
# and copied in with the shared libraries ldd names. Under emulation this
# shows function, never speed.
#
# Two boots (VM_BOOTS):
#   stable  the kernel this machine's apt names for linux-image-amd64
#           (Debian 12: 6.1): the test binaries of VM_PKGS, two ranks on one
#           rxe device, gotune bench's allocator hookup, then VM_EXTRA.
#   hosts   the kernel linux-image-amd64 names in VM_HOSTS_SUITE (default
#           trixie-backports, through a private apt configuration under
#           VM_CACHE): two network namespaces as two hosts, one rxe device
#           each, and gotune bench and sweep across them started as srun
#           would (scripts/vm/hosts.sh). rdma_rxe had one UDP socket and
#           routed only in the initial network namespace until its
#           per-namespace sockets (commits 13f2a53c2a71, f1327abd6abe, 2026;
#           7.3's rdma_rxe has them): on Debian 12's 6.1 an rxe device in
#           another namespace connects but its first send fails with
#           "local QP operation error" (docs/testing.md), so this boot needs the
#           newer kernel.
#
# Exit status: 0 when every boot passed (each guest prints
# "GOTUNE-VMTEST: PASS" on its serial console), 1 otherwise; the console
# logs go to $VM_LOGS/<boot>.log.
#
# Environment:
#   VM_CACHE        downloads and extracted packages (default build/vm; git-ignored)
#   VM_BOOTS        which boots, in order (default "stable hosts")
#   VM_HOSTS_SUITE  Debian suite of the hosts boot's kernel (default trixie-backports)
#   VM_PKGS         Go packages whose tests run in the stable boot (default internal/verbs transports/ib tuner/probe)
#   VM_RUN          -test.run pattern per package, as PKG=PATTERN words (default:
#                   tuner/probe=TestH7: the other probes need no RDMA and run in make test)
#   VM_TIMEOUT      seconds before a boot's qemu is killed (default 600)
#   VM_SMP          virtual CPUs (default 2), VM_MEM memory in MiB (default 1536)
#   VM_LOGS         where the console logs go (default $VM_CACHE)
#   VM_EXTRA        a script run inside the stable boot after the tests (a path here; copied in)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=${VM_CACHE:-$ROOT/build/vm}
BOOTS=${VM_BOOTS:-stable hosts}
HOSTS_SUITE=${VM_HOSTS_SUITE:-trixie-backports}
PKGS=${VM_PKGS:-internal/verbs transports/ib tuner/probe}
TIMEOUT=${VM_TIMEOUT:-600}
SMP=${VM_SMP:-2}
MEM=${VM_MEM:-1536}
LOGS=${VM_LOGS:-$CACHE}
GO=${GO:-go}
mkdir -p "$CACHE/debs" "$LOGS"
say() { echo "vmtest: $*" >&2; }

# apt_for SUITE: apt options for SUITE's packages ("" is this machine's own
# sources). Another suite gets a private configuration under the cache, so
# the machine's apt sources stay as they are.
apt_for() {
	APT=()
	[ -n "$1" ] || return 0
	local a=$CACHE/apt-$1
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
	echo "deb http://deb.debian.org/debian $1 main" > "$a/sources.list"
	APT=(-o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache")
	if ! ls "$a"/lists/*_Packages* >/dev/null 2>&1; then
		say "apt-get update ($1, private lists under $a)"
		apt-get "${APT[@]}" update -q >&2 || { say "apt-get update of $1 failed"; return 1; }
	fi
}

# download PKG...: apt-get download into the cache, once.
download() {
	local p
	for p in "$@"; do
		ls "$CACHE/debs/${p}_"*.deb >/dev/null 2>&1 && continue
		say "apt-get download $p"
		(cd "$CACHE/debs" && apt-get "${APT[@]}" download -q "$p" >&2) ||
			{ apt-get "${APT[@]}" update -qq && (cd "$CACHE/debs" && apt-get "${APT[@]}" download -q "$p" >&2); } || return 1
	done
}

# fetch_kernel SUITE: the kernel linux-image-amd64 names in SUITE, extracted
# under the cache; sets VMLINUZ and MODDIR. From Debian 13's kernels on the
# image package is split into linux-binary-* (vmlinuz) and linux-modules-*.
fetch_kernel() {
	apt_for "$1" || return 1
	local meta parts kdir try
	for try in 1 2; do # lists that name a kernel the mirror no longer has: update once
		meta=$(apt-cache "${APT[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
		[ -n "$meta" ] || { say "apt-cache depends linux-image-amd64 names no kernel${1:+ in $1} (apt-get update?)"; return 1; }
		parts=$(apt-cache "${APT[@]}" depends "$meta" | awk '/Depends: linux-(binary|modules)-[0-9]/{print $2}' | sort -u)
		download "$meta" $parts && break
		[ $try = 1 ] || return 1
		apt-get "${APT[@]}" update -q >&2 || return 1
	done
	kdir=$CACHE/$meta
	if [ ! -d "$kdir" ]; then
		say "dpkg -x $meta $parts"
		rm -rf "$kdir.tmp"
		for p in $meta $parts; do dpkg -x "$CACHE/debs/${p}_"*.deb "$kdir.tmp"; done
		mv "$kdir.tmp" "$kdir"
	fi
	VMLINUZ=$(find "$kdir" \( -path '*/boot/vmlinuz-*' -o -path '*/lib/modules/*/vmlinuz' \) | head -1)
	MODDIR=$(find "$kdir" -path '*/lib/modules/*' -name kernel -type d | head -1)
	[ -n "$VMLINUZ" ] && [ -n "$MODDIR" ] || { say "$meta: no vmlinuz or modules inside"; return 1; }
	KVER=$(basename "$(dirname "$MODDIR")")
}

# modfile NAME: the module's file under MODDIR ("" when the kernel has none).
modfile() { find "$MODDIR" \( -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" \) | head -1; }
modcat() {
	case $1 in *.xz) xz -dc "$1" ;; *.zst) zstd -qdc "$1" ;; *) cat "$1" ;; esac
}
# modclose NAME...: the modules and everything they depend on (their
# .modinfo depends= lists), dependencies first, into MODS.
modclose() {
	local m f d
	for m in "$@"; do
		case " $MODS " in *" $m "*) continue ;; esac
		f=$(modfile "$m")
		[ -n "$f" ] || { say "module $m not in kernel $KVER"; return 1; }
		d=$(modcat "$f" | tr '\0' '\n' | sed -n 's/^depends=//p' | tr , ' ')
		[ -z "$d" ] || modclose $d
		MODS="$MODS $m"
	done
}

# --- rdma-core's user space (this machine's suite, for every boot)
APT=()
ulibs="libibverbs1 ibverbs-providers ibverbs-utils libnl-3-200 libnl-route-3-200"
download $ulibs || { say "cannot download rdma-core's user space"; exit 1; }
ureal=$CACHE/userspace
stamp=$(for p in $ulibs; do ls "$CACHE/debs/${p}_"*.deb; done | md5sum | cut -c1-12)
if [ "$(cat "$ureal/.stamp" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$ureal" && mkdir -p "$ureal"
	for p in $ulibs; do dpkg -x "$CACHE/debs/${p}_"*.deb "$ureal"; done
	echo "$stamp" > "$ureal/.stamp"
fi

# --- test binaries, built here (cgo: needs libibverbs-dev's headers only).
bins=$CACHE/bin
mkdir -p "$bins"
rm -f "$bins"/*.test
for p in $PKGS; do
	[ -d "$p" ] || { say "$p does not exist (yet): skipped"; continue; }
	n=$(echo "$p" | tr / _)
	say "go test -c ./$p"
	$GO test -c -o "$bins/$n.test" "./$p"
done
# gotune itself: doctor's RDMA section, the bench of the stable boot and
# everything the hosts boot runs.
$GO build -o "$bins/gotune" ./cmd/gotune || say "go build ./cmd/gotune failed: no gotune inside"

# --- the part of the initramfs every boot shares
common=$CACHE/root
rm -rf "$common"
mkdir -p "$common"/{bin,sbin,proc,sys,dev,tmp,run,etc/libibverbs.d,lib/modules,lib64,pkg,usr/lib/x86_64-linux-gnu/libibverbs}
cp /bin/busybox "$common/bin/"
for a in $("$common/bin/busybox" --list); do [ -e "$common/bin/$a" ] || ln -s busybox "$common/bin/$a"; done
rm -f "$common/bin/ip" # busybox ip cannot make veth pairs: iproute2's
cp /usr/sbin/ip /usr/bin/rdma "$common/bin/"
cp "$ureal"/usr/bin/ibv_devinfo "$ureal"/usr/bin/ibv_devices "$ureal"/usr/bin/ibv_rc_pingpong "$common/bin/"
cp -a "$ureal"/usr/lib/x86_64-linux-gnu/libibverbs.so.1* "$ureal"/usr/lib/x86_64-linux-gnu/libnl-*.so* "$common/usr/lib/x86_64-linux-gnu/"
cp "$ureal"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-*.so "$common/usr/lib/x86_64-linux-gnu/libibverbs/"
cp "$ureal"/etc/libibverbs.d/rxe.driver "$common/etc/libibverbs.d/"
cp "$bins"/* "$common/bin/"
# shared libraries of everything executable inside, the package's own first
libpath=$ureal/usr/lib/x86_64-linux-gnu
for f in "$common"/bin/ip "$common"/bin/rdma "$common"/bin/ibv_* "$common"/bin/gotune "$common"/bin/*.test "$common"/usr/lib/x86_64-linux-gnu/libibverbs/*.so "$common"/usr/lib/x86_64-linux-gnu/libibverbs.so.1; do
	[ -e "$f" ] || continue
	LD_LIBRARY_PATH=$libpath ldd "$f" | awk '/not found/{print "MISSING " $1} /=>/{print $3} /^\t\//{print $1}'
done | sort -u | while read -r l x; do
	case $l in
	MISSING) say "a library of the guest is missing: $x"; exit 1 ;;
	"$ureal"/*) ;; # copied above
	/*) mkdir -p "$common$(dirname "$l")"; cp -L "$l" "$common$l" ;;
	esac
done
cp -L /lib64/ld-linux-x86-64.so.2 "$common/lib64/"
cp scripts/vm/init "$common/init"
chmod +x "$common/init"

# boot NAME SUITE: the initramfs for NAME with SUITE's kernel and modules,
# booted; the guest's status line decides.
boot() {
	local name=$1 suite=$2 r=$CACHE/root-$1 log=$LOGS/$1.log
	fetch_kernel "$suite" || return 1
	MODS=""
	# crc32_generic: the crc32 that 6.1's rdma_rxe asks the crypto API for
	# (later kernels have it built in)
	[ -z "$(modfile crc32_generic)" ] || modclose crc32_generic
	modclose veth ib_uverbs rdma_rxe || return 1
	rm -rf "$r" && cp -a "$common" "$r"
	for m in $MODS; do modcat "$(modfile "$m")" > "$r/lib/modules/$m.ko"; done
	echo $MODS > "$r/etc/modules.order"
	echo "${GOTUNE_REQUIRE:-rdma}" > "$r/etc/vmtest.require"
	echo "$name" > "$r/etc/vmtest.boot"
	: > "$r/etc/vmtest.pkgs"
	case $name in
	stable)
		local p n
		for p in $PKGS; do # each test runs in a copy of its package's directory (testdata)
			[ -d "$p" ] || continue
			n=$(echo "$p" | tr / _)
			mkdir -p "$r/pkg/$p"
			[ -d "$p/testdata" ] && cp -r "$p/testdata" "$r/pkg/$p/"
			echo "$p $n" >> "$r/etc/vmtest.pkgs"
		done
		echo "${VM_RUN-tuner/probe=TestH7}" > "$r/etc/vmtest.run"
		cp scripts/vm/churn.sh "$r/bin/vmtest-churn"
		[ -n "${VM_EXTRA:-}" ] && cp "$VM_EXTRA" "$r/bin/vmtest-extra"
		;;
	hosts)
		rm -f "$r"/bin/*.test # gotune alone runs there
		cp scripts/vm/hosts.sh "$r/bin/vmtest-hosts"
		cp scripts/vm/hosts-plan.yaml "$r/etc/hosts-plan.yaml"
		;;
	*) say "unknown boot $name (VM_BOOTS: stable, hosts)"; return 1 ;;
	esac
	chmod +x "$r"/bin/vmtest-* 2>/dev/null || true
	(cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) > "$CACHE/initrd-$name.gz"
	say "boot $name: initramfs $(du -h "$CACHE/initrd-$name.gz" | cut -f1), kernel $KVER${suite:+ ($suite)}, modules$MODS; booting (TCG, $SMP CPUs, timeout ${TIMEOUT}s)"
	local start rc status
	start=$(date +%s)
	set +e
	# tsc=unstable: under TCG on a loaded host the clocksource watchdog
	# finds the TSC skewed mid-run, and the kernel's switch away from it
	# patches live code, which crashed a trixie guest (int3 in
	# sched_clock_cpu); starting on another clocksource avoids the switch.
	timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -m "$MEM" -smp "$SMP" -nographic -no-reboot -nic none \
		-kernel "$VMLINUZ" -initrd "$CACHE/initrd-$name.gz" \
		-append "console=ttyS0 quiet panic=-1 loglevel=3 tsc=unstable" </dev/null >"$log" 2>&1
	rc=$?
	set -e
	tr -d '\r' < "$log" > "$log.tmp" && mv "$log.tmp" "$log"
	say "boot $name: qemu exited $rc after $(( $(date +%s) - start ))s; console log: $log"
	status=$(grep -a '^GOTUNE-VMTEST: ' "$log" | tail -1 || true)
	grep -a '^GOTUNE-VMTEST' "$log" >&2 || true
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then say "boot $name timed out after ${TIMEOUT}s"; return 1; fi
	case $name:$status in
	hosts:"GOTUNE-VMTEST: PASS"*internode=ib* | hosts:"GOTUNE-VMTEST: PASS"*internode=tcp*) return 0 ;;
	hosts:"GOTUNE-VMTEST: PASS"*) say "boot hosts: the status line names no inter-node decision (internode=ib|tcp)"; return 1 ;;
	stable:"GOTUNE-VMTEST: PASS"*) return 0 ;;
	*:) say "boot $name: no status line on the console (the guest crashed or hung?)"; tail -30 "$log" >&2; return 1 ;;
	*) return 1 ;;
	esac
}

failed=""
for b in $BOOTS; do
	case $b in
	stable) boot stable "" || failed="$failed stable" ;;
	hosts) boot hosts "$HOSTS_SUITE" || failed="$failed hosts" ;;
	*) say "unknown boot $b (VM_BOOTS: stable, hosts)"; failed="$failed $b" ;;
	esac
done
if [ -n "$failed" ]; then say "FAIL:$failed"; exit 1; fi
say "PASS: $BOOTS"
