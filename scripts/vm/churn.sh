#!/bin/sh
# vmtest-churn (scripts/vm/churn.sh, run by the VM's /init in the stable
# boot): gotune bench's alloc pattern over ib between two ranks on rxe0.
# Every buffer comes from the rank's allocator right before its message and
# goes back after the window, purged (MADV_DONTNEED: the next allocation
# gets the same address with fresh pages) or unmapped (no cache: mmap
# hands the same range out again). Sizes above ib's eager limit go by
# rendezvous straight from and into the buffers through the registration
# cache, so only bench's hookup of the allocator's release to the
# transport's Invalidate keeps a stale registration (still pinning the old
# pages) from being used: --validate checks every byte of every message.
failed=""
for rndv in read write; do
	for alloc in alloc.purge=immediate alloc.cache=0; do
		echo "== gotune bench -t ib -p alloc --validate, ib.rndv=$rndv, $alloc"
		gotune bench -t ib -p alloc --validate -s 8193,1M --reps 2 --iters 2 --warmup 1 --window 4 --settle 0 -q \
			--opt ib.rndv=$rndv --opt $alloc 2>&1 || failed="$failed $rndv/$alloc"
	done
done
[ -z "$failed" ] || { echo "churn: FAIL:$failed"; exit 1; }
