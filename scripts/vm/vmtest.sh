#!/usr/bin/env bash
# vmtest.sh: boot Debian's own kernel under qemu (TCG: no KVM needed) with
# Soft-RoCE (rdma_rxe) and run gotune's verbs tests inside it. The kernel and
# rdma-core's user space come from Debian's packages (apt-get download, cached
# under VM_CACHE); the test binaries are built here with go test -c and copied
# in with the shared libraries ldd names. Under emulation this shows function,
# never speed.
#
# Exit status: 0 when every test inside passed (the guest prints
# "GOTUNE-VMTEST: PASS" on its serial console), 1 otherwise; the console log
# goes to $VM_LOG (default build/vm/last.log).
#
# Environment:
#   VM_CACHE    cache of downloads and extracted packages (default build/vm; git-ignored)
#   VM_PKGS     Go packages whose tests run inside (default internal/verbs transports/ib tuner/probe)
#   VM_RUN      -test.run pattern per package, as PKG=PATTERN words (default:
#               tuner/probe=TestH7: the other probes need no RDMA and run in make test)
#   VM_TIMEOUT  seconds before qemu is killed (default 900)
#   VM_SMP      virtual CPUs (default 2), VM_MEM memory in MiB (default 1536)
#   VM_LOG      where the console log goes
#   VM_EXTRA    a script run inside after the tests (a path here; copied in)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=${VM_CACHE:-$ROOT/build/vm}
PKGS=${VM_PKGS:-internal/verbs transports/ib tuner/probe}
TIMEOUT=${VM_TIMEOUT:-900}
SMP=${VM_SMP:-2}
MEM=${VM_MEM:-1536}
LOG=${VM_LOG:-$CACHE/last.log}
GO=${GO:-go}
mkdir -p "$CACHE/debs"
say() { echo "vmtest: $*" >&2; }

# --- Debian packages: the kernel linux-image-amd64 depends on, and rdma-core's user space.
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$kpkg" ] || { say "apt-cache depends linux-image-amd64 names no kernel (apt-get update?)"; exit 1; }
debs="$kpkg libibverbs1 ibverbs-providers ibverbs-utils libnl-3-200 libnl-route-3-200"
for p in $debs; do
	if ! ls "$CACHE/debs/${p}_"*.deb >/dev/null 2>&1; then
		say "apt-get download $p"
		(cd "$CACHE/debs" && apt-get download -q "$p" >&2) || { apt-get update -qq && (cd "$CACHE/debs" && apt-get download -q "$p" >&2); }
	fi
done
kdir=$CACHE/$kpkg
if [ ! -d "$kdir/boot" ]; then
	say "dpkg -x $kpkg"
	rm -rf "$kdir.tmp" && dpkg -x "$CACHE/debs/${kpkg}_"*.deb "$kdir.tmp" && mv "$kdir.tmp" "$kdir"
fi
ureal=$CACHE/userspace
stamp=$(ls "$CACHE/debs" | grep -v "^$kpkg" | md5sum | cut -c1-12)
if [ "$(cat "$ureal/.stamp" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$ureal" && mkdir -p "$ureal"
	for p in libibverbs1 ibverbs-providers ibverbs-utils libnl-3-200 libnl-route-3-200; do
		dpkg -x "$CACHE/debs/${p}_"*.deb "$ureal"
	done
	echo "$stamp" > "$ureal/.stamp"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -1)
kver=${vmlinuz##*/vmlinuz-}
moddir=$kdir/lib/modules/$kver/kernel

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
# gotune itself (doctor's RDMA section inside); a tree that does not build
# it costs that section only.
$GO build -o "$bins/gotune" ./cmd/gotune || say "go build ./cmd/gotune failed: no gotune inside"

# --- the initramfs
r=$CACHE/root
rm -rf "$r"
mkdir -p "$r"/{bin,sbin,proc,sys,dev,tmp,run,etc/libibverbs.d,lib/modules,lib64,pkg,usr/lib/x86_64-linux-gnu/libibverbs}
cp /bin/busybox "$r/bin/"
for a in $("$r/bin/busybox" --list); do [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
rm -f "$r/bin/ip" # busybox ip cannot make veth pairs: iproute2's
mods="crc32_generic veth udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe"
for m in $mods; do
	f=$(find "$moddir" -name "$m.ko" -o -name "$m.ko.xz" | head -1)
	[ -n "$f" ] || { say "module $m not in $kpkg"; exit 1; }
	case $f in *.xz) xz -dc "$f" > "$r/lib/modules/$m.ko" ;; *) cp "$f" "$r/lib/modules/" ;; esac
done
echo "$mods" > "$r/etc/modules.order"
cp /usr/sbin/ip /usr/bin/rdma "$r/bin/"
cp "$ureal"/usr/bin/ibv_devinfo "$ureal"/usr/bin/ibv_devices "$r/bin/"
cp -a "$ureal"/usr/lib/x86_64-linux-gnu/libibverbs.so.1* "$ureal"/usr/lib/x86_64-linux-gnu/libnl-*.so* "$r/usr/lib/x86_64-linux-gnu/"
cp "$ureal"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-*.so "$r/usr/lib/x86_64-linux-gnu/libibverbs/"
cp "$ureal"/etc/libibverbs.d/rxe.driver "$r/etc/libibverbs.d/"
cp "$bins"/* "$r/bin/"
# shared libraries of everything executable inside, the package's own first
libpath=$ureal/usr/lib/x86_64-linux-gnu
for f in "$r"/bin/ip "$r"/bin/rdma "$r"/bin/ibv_devinfo "$r"/bin/gotune "$r"/bin/*.test "$r"/usr/lib/x86_64-linux-gnu/libibverbs/*.so "$r"/usr/lib/x86_64-linux-gnu/libibverbs.so.1; do
	LD_LIBRARY_PATH=$libpath ldd "$f" | awk '/not found/{print "MISSING " $1} /=>/{print $3} /^\t\//{print $1}'
done | sort -u | while read -r l x; do
	case $l in
	MISSING) say "a library of the guest is missing: $x"; exit 1 ;;
	"$ureal"/*) ;; # copied above
	/*) mkdir -p "$r$(dirname "$l")"; cp -L "$l" "$r$l" ;;
	esac
done
cp -L /lib64/ld-linux-x86-64.so.2 "$r/lib64/"
for p in $PKGS; do # each test runs in a copy of its package's directory (testdata)
	[ -d "$p" ] || continue
	n=$(echo "$p" | tr / _)
	mkdir -p "$r/pkg/$p"
	[ -d "$p/testdata" ] && cp -r "$p/testdata" "$r/pkg/$p/"
	echo "$p $n" >> "$r/etc/vmtest.pkgs"
done
echo "${VM_RUN-tuner/probe=TestH7}" > "$r/etc/vmtest.run"
echo "${GOTUNE_REQUIRE:-rdma}" > "$r/etc/vmtest.require"
[ -n "${VM_EXTRA:-}" ] && cp "$VM_EXTRA" "$r/bin/vmtest-extra"
cp scripts/vm/init "$r/init"
chmod +x "$r/init"
(cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) > "$CACHE/initrd.gz"
say "initramfs $(du -h "$CACHE/initrd.gz" | cut -f1), kernel $kver; booting (TCG, $SMP CPUs, timeout ${TIMEOUT}s)"

# --- boot
mkdir -p "$(dirname "$LOG")"
start=$(date +%s)
set +e
timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -m "$MEM" -smp "$SMP" -nographic -no-reboot -nic none \
	-kernel "$vmlinuz" -initrd "$CACHE/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1 loglevel=3" </dev/null >"$LOG" 2>&1
rc=$?
set -e
tr -d '\r' < "$LOG" > "$LOG.tmp" && mv "$LOG.tmp" "$LOG"
say "qemu exited $rc after $(( $(date +%s) - start ))s; console log: $LOG"
status=$(grep -a '^GOTUNE-VMTEST: ' "$LOG" | tail -1 || true)
grep -a '^GOTUNE-VMTEST' "$LOG" >&2 || true
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then say "timed out after ${TIMEOUT}s"; exit 1; fi
case $status in
"GOTUNE-VMTEST: PASS"*) exit 0 ;;
"") say "no status line on the console (the guest crashed or hung?)"; tail -30 "$LOG" >&2; exit 1 ;;
*) exit 1 ;;
esac
