package profile

import (
	"slices"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	sizes := []int{8, 4096, 8192, 1 << 20} // 4 routes + 5 thresholds per pair, + 3 allocator fields
	decision := func(f func(*Decision)) func(*Profile) {
		return func(p *Profile) {
			d := p.Decisions["intranode"][HostHost]
			d.Ranges = slices.Clone(d.Ranges)
			f(&d)
			p.Decisions["intranode"][HostHost] = d
		}
	}
	cases := []struct {
		name         string
		mutate       func(*Profile)
		agree, total int
		differences  []string
	}{
		{"same", func(*Profile) {}, 12, 12, nil},
		{"not decisions", func(p *Profile) { p.Created, p.Evidence.Records, p.Fingerprint.Host = "2027-01-01T00:00:00Z", 1, "n02" }, 12, 12, nil},
		{"thresholds one step apart", decision(func(d *Decision) { d.EagerLimit, d.FIFODepth, d.CellSize = 8192, 32, 4160*2 }), 12, 12, nil},
		{"thresholds two steps apart", decision(func(d *Decision) { d.FragSize, d.FragSlots = 256<<10, 4 }), 10, 12,
			[]string{"decisions.intranode.host_host.frag_size: 65536 vs 262144", "decisions.intranode.host_host.frag_slots: 16 vs 4"}},
		{"crossover moved", decision(func(d *Decision) { d.Ranges[2].Min = 8192 }), 11, 12,
			[]string{"decisions.intranode.host_host: size 8K: sm pipeline vs cma rendezvous"}},
		{"allocator", func(p *Profile) { p.Allocator = Allocator{CacheBytes: 256 << 20, Purge: "never", THP: true} }, 10, 12,
			[]string{"allocator.cache_bytes: 67108864 vs 268435456", "allocator.purge: delayed vs never"}},
		{"cache one step apart", func(p *Profile) { p.Allocator.CacheBytes = 32 << 20 }, 12, 12, nil},
		{"a pair only one has", func(p *Profile) {
			p.Decisions["intranode"]["host_device"] = p.Decisions["intranode"][HostHost]
		}, 12, 21, []string{"decisions.intranode.host_device: only in b (9 decisions)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := sample()
			c.mutate(b)
			ag := Compare(sample(), b, sizes)
			if ag.Agree != c.agree || ag.Total != c.total || !slices.Equal(ag.Differences, c.differences) {
				t.Errorf("Compare = %d of %d, differences\n%s\nwant %d of %d,\n%s", ag.Agree, ag.Total,
					strings.Join(ag.Differences, "\n"), c.agree, c.total, strings.Join(c.differences, "\n"))
			}
			if want := float64(c.agree) / float64(c.total); ag.Fraction() != want {
				t.Errorf("Fraction() = %v, want %v", ag.Fraction(), want)
			}
			// Symmetric in what it counts.
			if back := Compare(b, sample(), sizes); back.Agree != ag.Agree || back.Total != ag.Total {
				t.Errorf("Compare(b, a) = %d of %d, Compare(a, b) = %d of %d", back.Agree, back.Total, ag.Agree, ag.Total)
			}
		})
	}
}

// The ≥ 90% rule on the default ladder: one moved crossover of 27 sizes
// keeps two sweeps in agreement; a different transport above 4K does not.
func TestCompareNinetyPercent(t *testing.T) {
	moved := sample()
	moved.Decisions["intranode"][HostHost].Ranges[2].Min = 512 << 10
	if f := Compare(sample(), moved, DefaultSizes()).Fraction(); f < 0.9 {
		t.Errorf("a crossover one step away: agreement %.3f, want ≥ 0.9", f)
	}
	cma := sample()
	cma.Decisions["intranode"][HostHost].Ranges[1] = Range{Min: 4097, Transport: "cma", Protocol: "rendezvous"}
	if f := Compare(sample(), cma, DefaultSizes()).Fraction(); f >= 0.9 {
		t.Errorf("cma instead of the sm pipeline from 4K+1 to 1M-1: agreement %.3f, want < 0.9", f)
	}
}

func TestWithinTwo(t *testing.T) {
	for _, c := range []struct {
		x, y int64
		want bool
	}{{1, 1, true}, {1, 2, true}, {2, 1, true}, {3, 6, true}, {3, 7, false}, {0, 1, false}, {0, 0, true}, {-2, -1, false}, {1 << 62, 1<<63 - 1, true}} {
		if got := withinTwo(c.x, c.y); got != c.want {
			t.Errorf("withinTwo(%d, %d) = %t", c.x, c.y, got)
		}
	}
}

func TestAgreementEmpty(t *testing.T) {
	if f := (Agreement{}).Fraction(); f != 1 {
		t.Errorf("nothing to decide: %v, want 1", f)
	}
}
