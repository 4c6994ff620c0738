package nccl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/transporttest"
)

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{"nccl-pair": pairRank, "nccl-coll": collRank})
}

// The options become NCCL's variables as NCCL reads them (sizes in
// bytes), and a value NCCL would misread or hang with is refused naming
// the option.
func TestSettings(t *testing.T) {
	for _, tc := range []struct {
		opts transports.Options
		want map[string]string
		err  string
	}{
		{opts: nil, want: map[string]string{}},
		{opts: transports.Options{"nccl.buffsize": "4M", "nccl.p2p-nvl-chunksize": "512K", "nccl.max-ctas": "16", "nccl.proto": "ll,simple"},
			want: map[string]string{"NCCL_BUFFSIZE": "4194304", "NCCL_P2P_NVL_CHUNKSIZE": "524288", "NCCL_MAX_CTAS": "16", "NCCL_PROTO": "ll,simple"}},
		{opts: transports.Options{"nccl.ll128-buffsize": "9830400"}, want: map[string]string{"NCCL_LL128_BUFFSIZE": "9830400"}},
		{opts: transports.Options{"nccl.ll128-buffsize": "128K"}, err: "nccl.ll128-buffsize: NCCL_LL128_BUFFSIZE=131072: not NCCL's"},
		{opts: transports.Options{"nccl.min-ctas": "many"}, err: `nccl.min-ctas="many": want an integer`},
		{opts: transports.Options{"nccl.buffsize": "big"}, err: "nccl.buffsize"},
		{opts: transports.Options{"nccl.algo": "ring "}, err: "nccl.algo: \"ring \": empty or with leading or trailing blanks"},
	} {
		got, err := Settings(tc.opts)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one naming %q", tc.opts, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.opts, err)
		case !maps.Equal(got, tc.want):
			t.Errorf("%v: got %v, want %v", tc.opts, got, tc.want)
		}
	}
}

// pairScenario is what a rank of a pair test does.
type pairScenario struct {
	Opts  transports.Options
	Sizes []int
}

// open opens the transport in a rank of a scenario.
func open(r *launch.Rank) (*Transport, pairScenario, error) {
	return transporttest.OpenScenario[*Transport](r, "nccl", func(p pairScenario) transports.Env { return transporttest.Env(r, p.Opts) })
}

// pairRank opens the transport and, per size, streams a window of device
// messages from rank 0 to 1, exchanges one each way with both posted
// before either waits (which deadlocks unless the two go to NCCL in one
// group), and answers with a 4-byte message from pageable host memory
// (staged); rank 1 checks every byte it got.
func pairRank(r *launch.Rank) (any, error) {
	t, p, err := open(r)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	peer := transporttest.Peer(r)
	const window = 8
	ack, err := sys.MapAnon(sys.PageSize, true)
	if err != nil {
		return nil, err
	}
	defer sys.Unmap(ack)
	for _, n := range p.Sizes {
		bufs := make([]*cuda.Buffer, window+1)
		for i := range bufs {
			if bufs[i], err = t.GPU().Alloc(cuda.MemDevice, n); err != nil {
				return nil, err
			}
			defer bufs[i].Free()
		}
		// Rank 0 fills message i with pattern(n, i); rank 1 clears its buffers.
		for i, b := range bufs {
			fill := make([]byte, n)
			if r.ID == 0 {
				fill = pattern(n, byte(i))
			}
			if err := cuda.CopyHtoD(b.Ptr(), fill); err != nil {
				return nil, err
			}
		}
		var reqs []transports.Request
		for i := range window {
			var q transports.Request
			if r.ID == 0 {
				q, err = t.Isend(peer, sys.BytesAt(bufs[i].Ptr(), n))
			} else {
				q, err = t.Irecv(peer, sys.BytesAt(bufs[i].Ptr(), n))
			}
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, q)
		}
		if err := t.Wait(reqs...); err != nil {
			return nil, fmt.Errorf("window of %d-byte messages: %w", n, err)
		}
		// Both ranks send their last buffer and receive into their first.
		s, err := t.Isend(peer, sys.BytesAt(bufs[window].Ptr(), n))
		if err != nil {
			return nil, err
		}
		q, err := t.Irecv(peer, sys.BytesAt(bufs[0].Ptr(), n))
		if err != nil {
			return nil, err
		}
		if err := t.Wait(s, q); err != nil {
			return nil, fmt.Errorf("exchange of %d bytes: %w", n, err)
		}
		if r.ID == 1 {
			got := make([]byte, n)
			for i, b := range bufs[:window] {
				if err := cuda.CopyDtoH(got, b.Ptr()); err != nil {
					return nil, err
				}
				want := pattern(n, byte(i))
				if i == 0 {
					want = pattern(n, window) // overwritten by the exchange
				}
				if at := firstDiff(got, want); at >= 0 {
					return nil, fmt.Errorf("%d-byte message %d: byte %d is %#x, want %#x", n, i, at, got[at], want[at])
				}
			}
			copy(ack, "done")
			if err := t.Send(peer, ack[:4]); err != nil {
				return nil, fmt.Errorf("staged acknowledgement: %w", err)
			}
		} else {
			clear(ack[:4])
			if _, err := t.Recv(peer, ack[:4]); err != nil {
				return nil, fmt.Errorf("staged acknowledgement: %w", err)
			}
			if string(ack[:4]) != "done" {
				return nil, fmt.Errorf("staged acknowledgement after %d bytes: %q", n, ack[:4])
			}
		}
	}
	return "ok", nil
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// Through the real NCCL between two GPUs: windows, a crossed exchange and
// a staged host message arrive whole.
func TestPairThroughNCCL(t *testing.T) {
	needTwoGPUs(t)
	transporttest.Results[string](t, transporttest.Job{Kind: "nccl-pair", Needs: "nccl",
		Params: pairScenario{Sizes: []int{1, 4096, 1 << 20}}})
}

// Two ranks bound to one GPU are refused before NCCL's init, naming both.
func TestOneGPUTwoRanksIsRefused(t *testing.T) {
	needTwoGPUs(t)
	_, err := transporttest.Start(t, transporttest.Job{Kind: "nccl-pair", Needs: "nccl",
		Params: pairScenario{Opts: transports.Options{cudaipc.KeyGPUs: "0"}, Sizes: []int{8}}})
	if err == nil || !strings.Contains(err.Error(), "ranks 0 and 1 both bind GPU") {
		t.Fatalf("got %v, want the two ranks on one GPU refused", err)
	}
}

// More ranks than the GPUs a host shows is not supported there (doctor
// and the sweep pass over nccl); chosen GPUs shared is an error (above).
func TestMoreRanksThanGPUsIsNotSupported(t *testing.T) {
	needTwoGPUs(t)
	t.Setenv("CUDA_VISIBLE_DEVICES", "0") // the ranks inherit it
	_, err := transporttest.Start(t, transporttest.Job{Kind: "nccl-pair", Params: pairScenario{Sizes: []int{8}}})
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "both bind GPU") {
		t.Fatalf("got %v, want the second rank on the one GPU not supported", err)
	}
}

// needTwoGPUs skips (or, where GOTUNE_REQUIRE names nccl, fails) without
// NCCL and two GPUs.
func needTwoGPUs(t *testing.T) {
	t.Helper()
	err := Present(nil)
	if err == nil {
		var n int
		if n, err = cuda.DeviceCount(); err == nil && n < 2 {
			err = fmt.Errorf("%w: %d CUDA device(s), the pair needs 2", sys.ErrNotSupported, n)
		}
	}
	if err != nil && !errors.Is(err, sys.ErrNotSupported) {
		t.Fatal(err)
	}
	testutil.SkipUnless(t, "nccl", err)
}

// collRank runs each collective once on small whole numbers, exactly
// representable as floats, and checks the result on the host.
func collRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	n, size := r.Size, 1<<16 // floats a rank
	send, err := t.GPU().Alloc(cuda.MemDevice, 4*n*size)
	if err != nil {
		return nil, err
	}
	defer send.Free()
	recv, err := t.GPU().Alloc(cuda.MemDevice, 4*n*size)
	if err != nil {
		return nil, err
	}
	defer recv.Free()
	// Element i of rank k is k*1000 + i%997.
	host := make([]byte, 4*n*size)
	for i := range n * size {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(r.ID*1000+i%997)))
	}
	if err := cuda.CopyHtoD(send.Ptr(), host); err != nil {
		return nil, err
	}
	sum := func(i int) float32 { return float32(n*(n-1)/2*1000 + n*(i%997)) }
	own := func(k, i int) float32 { return float32(k*1000 + i%997) }
	for _, c := range []struct {
		op         transports.CollOp
		send, recv int // floats
		want       func(i int) float32
	}{
		{transports.AllReduce, size, size, sum},
		{transports.AllGather, size, n * size, func(i int) float32 { return own(i/size, i%size) }},
		{transports.ReduceScatter, n * size, size, func(i int) float32 { return sum(r.ID*size + i) }},
		{transports.Broadcast, size, size, func(i int) float32 { return own(0, i) }},
	} {
		q, err := t.Collective(c.op, sys.BytesAt(send.Ptr(), 4*c.send), sys.BytesAt(recv.Ptr(), 4*c.recv), 0)
		if err != nil {
			return nil, err
		}
		if err := t.Wait(q); err != nil {
			return nil, fmt.Errorf("%s: %w", c.op, err)
		}
		got := make([]byte, 4*c.recv)
		if err := cuda.CopyDtoH(got, recv.Ptr()); err != nil {
			return nil, err
		}
		for i := range c.recv {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != c.want(i) {
				return nil, fmt.Errorf("%s on rank %d: element %d is %v, want %v", c.op, r.ID, i, v, c.want(i))
			}
		}
	}
	return "ok", nil
}

// Each collective through the real NCCL gives the exact result.
func TestCollectivesThroughNCCL(t *testing.T) {
	needTwoGPUs(t)
	transporttest.Results[string](t, transporttest.Job{Kind: "nccl-coll", Needs: "nccl", Params: pairScenario{}})
}

// A collective's lengths are checked against transports.Collectives before
// NCCL could read or write past a buffer.
func TestCollectiveLengths(t *testing.T) {
	tr := &Transport{size: 4}
	for _, c := range []struct {
		op         transports.CollOp
		send, recv int
		ok         bool
	}{
		{transports.AllReduce, 4096, 4096, true},
		{transports.AllReduce, 4096, 2048, false},
		{transports.AllReduce, 4094, 4094, false}, // not whole floats
		{transports.AllGather, 1024, 4096, true},
		{transports.AllGather, 1024, 1024, false},
		{transports.ReduceScatter, 4096, 1024, true},
		{transports.ReduceScatter, 4096, 4096, false},
		{transports.Broadcast, 777, 777, true},
		{"gather", 8, 32, false},
	} {
		if err := tr.collLengths(c.op, c.send, c.recv); (err == nil) != c.ok {
			t.Errorf("%s %d/%d at 4 ranks: %v, want ok=%v", c.op, c.send, c.recv, err, c.ok)
		}
	}
}
