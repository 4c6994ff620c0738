package knem_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/knem"
	"github.com/gotune/gotune/transports/transporttest"
)

// devices are the knem devices the tests run against: the fake always,
// the module's when /dev/knem is there (GOTUNE_REQUIRE=knem: it must be).
func devices(t *testing.T) []string {
	_, err := knem.Probe(nil)
	if err != nil && !errors.Is(err, sys.ErrNotSupported) {
		t.Fatal(err)
	}
	return transporttest.Devices(t, "knem", knem.Fake, sys.KnemDevice, err)
}

// run runs the pair of ranks of kind with opts; T is what each returns.
func run[T any](t *testing.T, kind string, opts transports.Options) []T {
	t.Helper()
	seg := transporttest.SharedBytes(t, "knem", 2, nil)
	return transporttest.Results[T](t, transporttest.Job{Kind: kind, Params: opts, Segment: seg})
}

func open(r *launch.Rank) (*knem.Transport, transports.Env, error) {
	o, err := transporttest.Params[transports.Options](r)
	if err != nil {
		return nil, transports.Env{}, err
	}
	env := transporttest.Env(r, o)
	t, err := knem.New(env)
	return t, env, err
}

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{
		"knem-traffic":    trafficRank,
		"knem-invalidate": invalidateRank,
		"knem-check":      checkRank,
	})
}

// sizes cross every protocol boundary of the default sm parameters: the
// eager limit (4K) and the knem threshold (4K+1), a fragment (64K), and
// sizes past several fragments and pages, unaligned.
var sizes = []int{1, 4095, 4096, 4097, 8191, 64 << 10, 64<<10 + 1, 1 << 20, 4<<20 + 3}

// report is what a traffic rank returns.
type report struct {
	Stats     knem.Stats
	Info      string
	Fallbacks int
	Messages  int // rendezvous messages this rank exported for
}

// trafficRank: both ranks send every size to each other, three rounds,
// from and into the same buffers (a cached region is reused), a window of
// non-blocking operations each round; every byte is checked. Then one
// message longer than its receive buffer truncates.
func trafficRank(r *launch.Rank) (any, error) {
	t, env, err := open(r)
	if err != nil {
		return nil, err
	}
	p, err := knem.ParseParams(env.Options, 4096)
	if err != nil {
		return nil, err
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	peer := transporttest.Peer(r)
	m, err := transporttest.NewMessages(sizes)
	if err != nil {
		return nil, err
	}
	sbuf, rbuf := m.Send, m.Recv
	exported := 0
	for round := range 3 {
		var reqs []transports.Request
		m.Fill(func(i int) int { return round*100 + i*2 + r.ID })
		for i, n := range sizes {
			rq, err := t.Irecv(peer, m.In(i))
			if err != nil {
				return nil, err
			}
			sq, err := t.Isend(peer, m.Out(i))
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, rq, sq)
			if n >= p.Threshold {
				exported++
			}
		}
		if err := t.Wait(reqs...); err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		for i, n := range sizes {
			if got := reqs[2*i].Len(); got != n {
				return nil, fmt.Errorf("round %d: message of %d bytes from rank %d: got %d bytes", round, n, peer, got)
			}
		}
		if err := m.Verify(func(i int) int { return round*100 + i*2 + peer }, peer); err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
	}
	// Truncation: 1 MiB into 512 KiB.
	transporttest.Pattern(sbuf[:1<<20], 7+r.ID)
	var err0, err1 error
	if r.ID == 0 {
		err0 = t.Send(1, sbuf[:1<<20])
		_, err1 = t.Recv(1, rbuf[:512<<10])
	} else {
		_, err1 = t.Recv(0, rbuf[:512<<10])
		err0 = t.Send(0, sbuf[:1<<20])
	}
	prefix := transporttest.Verify(rbuf[:512<<10], 7+peer, "truncated prefix")
	if err0 != nil || !errors.Is(err1, transports.ErrTruncated) || prefix != nil {
		return nil, fmt.Errorf("truncation: send %v, receive %v (want ErrTruncated), %v", err0, err1, prefix)
	}
	rep := report{Stats: t.Stats(), Info: t.Info().String(), Fallbacks: len(t.Fallbacks()), Messages: exported + 1}
	return rep, t.Close()
}

// Validated traffic at every protocol boundary, both directions, in each
// mode and with each region policy, against the fake and (when present)
// the module: single-use regions are made one per message and none is
// left to destroy; cached ones are made once per buffer and reused.
func TestTraffic(t *testing.T) {
	for _, dev := range devices(t) {
		for _, mode := range []string{"pull", "push"} {
			for _, regions := range []string{"single", "cached"} {
				t.Run(fmt.Sprintf("%s/%s/%s", dev, mode, regions), func(t *testing.T) {
					res := run[report](t, "knem-traffic", transports.Options{"knem.device": dev, "knem.mode": mode, "knem.regions": regions})
					for rank, rep := range res {
						t.Logf("rank %d: %s; %+v", rank, rep.Info, rep.Stats)
						st := rep.Stats
						if rep.Fallbacks != 0 {
							t.Errorf("rank %d fell back to copy-in/copy-out", rank)
						}
						switch regions {
						case "single":
							if st.Created != int64(rep.Messages) || st.Hits != 0 || st.Destroyed != 0 {
								t.Errorf("rank %d: %d regions made, %d hits, %d destroyed; want %d, 0, 0", rank, st.Created, st.Hits, st.Destroyed, rep.Messages)
							}
						case "cached":
							// Six rendezvous buffers, reused for three rounds; the
							// truncating message's buffer is the first's, longer.
							if st.Created != 7 || st.Hits != int64(rep.Messages)-7 {
								t.Errorf("rank %d: %d regions made, %d hits; want 7 and %d", rank, st.Created, st.Hits, rep.Messages-7)
							}
						}
						if st.Copies != int64(rep.Messages) {
							t.Errorf("rank %d: %d copies, want %d (one per rendezvous message)", rank, st.Copies, rep.Messages)
						}
					}
				})
			}
		}
	}
}

// invalidateRank: rank 0 sends from a buffer, which the allocator then
// gives back (Invalidate, then unmap) and maps anew, and sends again: the
// cached region is destroyed and a fresh one made, and the receiver gets
// the new contents every time.
func invalidateRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	const n = 256 << 10
	for i := range 4 {
		buf, err := sys.MapAnon(n, true)
		if err != nil {
			return nil, err
		}
		if r.ID == 0 {
			transporttest.Pattern(buf, i)
			for range 2 {
				if err := t.Send(1, buf); err != nil {
					return nil, err
				}
			}
			t.Invalidate(sys.AddressOf(buf), n)
		} else {
			for range 2 {
				clear(buf)
				if _, err := t.Recv(0, buf); err != nil {
					return nil, err
				}
				if err := transporttest.Verify(buf, i, fmt.Sprintf("buffer %d (stale or wrong contents)", i)); err != nil {
					return nil, err
				}
			}
		}
		if err := sys.Unmap(buf); err != nil {
			return nil, err
		}
	}
	return t.Stats(), t.Close()
}

// Invalidation between messages: a cached region of a buffer given back
// is destroyed, the next buffer gets its own, and the data is always the
// buffer's present contents.
func TestInvalidate(t *testing.T) {
	for _, dev := range devices(t) {
		t.Run(dev, func(t *testing.T) {
			st := run[knem.Stats](t, "knem-invalidate", transports.Options{"knem.device": dev, "knem.regions": "cached"})[0]
			if st.Created != 4 || st.Hits != 4 || st.Invalidated != 4 {
				t.Errorf("sender: %+v; want 4 regions made, 4 hits, 4 invalidated", st)
			}
		})
	}
}

func checkRank(r *launch.Rank) (any, error) {
	t, env, err := open(r)
	if err != nil {
		return nil, err
	}
	d, err := transports.Lookup("knem")
	if err != nil {
		return nil, err
	}
	return nil, errors.Join(d.Check(t, env), t.Close())
}

// The driver's Check copies a marker from the next rank through its cookie.
func TestCheck(t *testing.T) {
	for _, dev := range devices(t) {
		t.Run(dev, func(t *testing.T) { run[any](t, "knem-check", transports.Options{"knem.device": dev}) })
	}
}

// Without the module, Probe and New say why, as ErrNotSupported; DMA on
// demand fails where the driver reports none.
func TestAbsence(t *testing.T) {
	missing := t.TempDir() + "/knem"
	_, err := knem.Probe(transports.Options{"knem.device": missing})
	if !errors.Is(err, transports.ErrNotSupported) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing device: %v", err)
	}
	_, err = knem.New(transports.Env{Size: 1, PIDs: []int{os.Getpid()}, Options: transports.Options{"knem.device": missing}})
	if !errors.Is(err, transports.ErrNotSupported) {
		t.Errorf("New without the device: %v", err)
	}
	_, err = knem.Probe(transports.Options{"knem.device": knem.Fake, "knem.dma": "on"})
	if !errors.Is(err, transports.ErrNotSupported) || !strings.Contains(err.Error(), "no DMA engine") {
		t.Errorf("knem.dma=on on a driver without DMA: %v", err)
	}
	info, err := knem.Probe(transports.Options{"knem.device": knem.Fake})
	if err != nil || info.ABI != 0xd {
		t.Errorf("fake: %v, %v", info, err)
	}
}
