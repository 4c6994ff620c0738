package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
)

// H6: single copy without permission, or after the peer is gone. Two ranks
// over cma where the kernel refuses the single copy for real: rank 1 is not
// dumpable and rank 0 runs without CAP_SYS_PTRACE (a per-thread capability
// set), so rank 0's process_vm_readv/writev on rank 1 fail with EPERM.
// Messages of rendezvous sizes go both ways, in pull and in push mode, and
// every byte is checked: the engine must fall back to copy-in/copy-out and
// record why on both ranks. Then a peer leaves in the middle of a
// rendezvous, in each role and mode: the survivor must get a clear error,
// not a hang (the watchdog) and not a success. The unsafe variant
// (cma.onerror=ignore) treats a failed copy as done, as code that does not
// check process_vm_readv's result does, and delivers wrong bytes.

const h6Kind = "probe-h6"

type h6Params struct {
	Options  transports.Options `json:"options"`
	Scenario string             `json:"scenario"` // "fallback" or "gone"
	Survivor string             `json:"survivor"` // gone: "sender" or "receiver"
	Rounds   int                `json:"rounds"`   // fallback: rounds of every size each way
}

// h6Result is what a rank reports.
type h6Result struct {
	Fallback string `json:"fallback,omitempty"` // why it gave up single copy
	Error    string `json:"error,omitempty"`    // the survivor's error (gone)
	Messages int    `json:"messages,omitempty"` // validated messages received
}

func init() {
	launch.Register(h6Kind, h6Rank)
	register(&Probe{
		ID:          "H6",
		Hazard:      "single copy without permission or after the peer is gone (CMA under ptrace rules; a peer exiting mid-copy)",
		Description: "cma with the kernel refusing rank 0's copies (EPERM): validated rendezvous messages both ways, pull and push, must fall back; a peer exits mid-rendezvous: the survivor must get a clear error; unsafe: a failed copy counts as done (cma.onerror=ignore)",
		RunOptions:  runH6,
	})
}

// h6Options: the configuration under test (nil: the defaults) in the given
// mode; the unsafe variant ignores copy errors, the safe one keeps what the
// configuration says. Progress is polling: the refusal is staged on the
// application's thread (capabilities are per thread), so every copy must
// happen there, not on a progress thread.
func h6Options(base transports.Options, mode string, unsafe bool) transports.Options {
	o := base.With(nil) // a copy to change
	o[cma.KeyMode] = mode
	o[sm.KeyProgress] = "poll"
	if unsafe {
		o[cma.KeyOnError] = "ignore"
	}
	return o
}

func runH6(ctx context.Context, unsafe bool, deadline time.Duration, base transports.Options) (v Verdict) {
	d, err := transports.Lookup("cma")
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	run := func(name string, par h6Params) ([]h6Result, bool) {
		seg, err := d.SharedBytes(2, par.Options)
		if err != nil {
			v.Outcome, v.Detail = ProbeFailed, err.Error()
			return nil, false
		}
		params, _ := json.Marshal(par) // plain data always encodes
		res, err := launch.Run(ctx, launch.Job{Kind: h6Kind, Size: 2, SegmentBytes: seg, Params: params, Stall: deadline}, quiet)
		if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
			v.Detail = name + ": " + v.Detail
			return nil, false
		}
		out := make([]h6Result, len(res))
		for r, raw := range res {
			if err := json.Unmarshal(raw, &out[r]); err != nil {
				v.Outcome, v.Detail = ProbeFailed, fmt.Sprintf("%s: rank %d's result: %v", name, r, err)
				return nil, false
			}
		}
		return out, true
	}
	const rounds = 4
	var messages int
	var refusal string
	for _, mode := range []string{"pull", "push"} {
		res, ok := run("fallback "+mode, h6Params{Options: h6Options(base, mode, unsafe), Scenario: "fallback", Rounds: rounds})
		if !ok {
			return v
		}
		for r, x := range res {
			if x.Fallback == "" {
				v.Outcome, v.Detail = ProbeFailed, fmt.Sprintf("fallback %s: rank %d never fell back: the kernel did not refuse the single copy here, so the fallback was not exercised", mode, r)
				return v
			}
			messages += x.Messages
		}
		if refusal == "" {
			refusal = res[0].Fallback
		}
	}
	var example string
	for _, mode := range []string{"pull", "push"} {
		for _, survivor := range []string{"sender", "receiver"} {
			name := fmt.Sprintf("peer gone (%s, surviving %s)", mode, survivor)
			res, ok := run(name, h6Params{Options: h6Options(base, mode, unsafe), Scenario: "gone", Survivor: survivor})
			if !ok {
				return v
			}
			if example == "" {
				example = res[0].Error
			}
		}
	}
	v.Outcome = Passed
	v.Detail = fmt.Sprintf("kernel refused single copy (%s); %d validated rendezvous-size messages both ways in pull and push mode fell back to copy-in/copy-out, both ranks recording why; "+
		"a peer exiting mid-rendezvous left the survivor a clear error as sender and receiver in both modes (e.g. %q)", shortReason(refusal), messages, example)
	return v
}

// shortReason keeps the system call and errno of a fallback reason.
func shortReason(s string) string {
	call := "single copy"
	for _, c := range []string{"process_vm_readv", "process_vm_writev"} {
		if strings.Contains(s, c) {
			call = c
		}
	}
	if i := strings.LastIndex(s, "("); i >= 0 && strings.HasSuffix(s, ")") {
		return call + " " + s[i+1:len(s)-1]
	}
	return call
}

func h6Rank(r *launch.Rank) (any, error) {
	var par h6Params
	t, err := cmaRank(r, &par, &par.Options)
	if err != nil {
		return nil, err
	}
	ep := t.(*sm.Endpoint)
	sp, err := sm.ParseParams(par.Options)
	if err != nil {
		return nil, err
	}
	cp, err := cma.ParseParams(par.Options, sp.EagerLimit)
	if err != nil {
		return nil, err
	}
	// Rendezvous sizes: the smallest, a middling and a large one.
	sizes := []int{cp.Threshold, max(cp.Threshold, 64<<10), max(cp.Threshold, 1<<20)}
	buf, err := sys.MapAnon(sizes[2], true)
	if err != nil {
		return nil, err
	}
	defer sys.Unmap(buf)
	if par.Scenario == "gone" {
		return h6Gone(r, ep, par, buf[:sizes[2]])
	}
	return h6Fallback(r, ep, par, sizes, buf)
}

// h6Fallback: message i goes 0→1, then 1→0, sizes in turn; rank 0 makes
// every call without CAP_SYS_PTRACE, against a rank 1 that is not dumpable.
func h6Fallback(r *launch.Rank, ep *sm.Endpoint, par h6Params, sizes []int, buf []byte) (any, error) {
	if r.ID == 1 {
		if err := sys.SetDumpable(false); err != nil {
			return nil, err
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	want := make([]byte, len(buf))
	received := 0
	exchange := func() error {
		for i := range par.Rounds * len(sizes) {
			n := sizes[i%len(sizes)]
			for _, from := range []int{0, 1} {
				if from == r.ID {
					fillH6(buf[:n], from, i)
					if err := ep.Send(1-from, buf[:n]); err != nil {
						return fmt.Errorf("message %d (%d bytes) to rank %d: %w", i, n, 1-from, err)
					}
				} else {
					poison(buf[:n])
					got, err := ep.Recv(from, buf[:n])
					if err != nil {
						return fmt.Errorf("message %d (%d bytes) from rank %d: %w", i, n, from, err)
					}
					fillH6(want[:n], from, i)
					if got != n || string(buf[:n]) != string(want[:n]) {
						return fmt.Errorf("%s: message %d (%d bytes) from rank %d: received %d bytes, first bad byte at %d", corruptionMarker, i, n, from, got, firstDiff(buf[:n], want[:n]))
					}
					received++
				}
				r.Beat()
			}
		}
		return nil
	}
	var err error
	if r.ID == 0 {
		err = sys.WithoutPtraceCapability(exchange)
	} else {
		err = exchange()
	}
	if err != nil {
		return nil, err
	}
	res := h6Result{Messages: received}
	if why := ep.Fallbacks()[1-r.ID]; why != nil {
		res.Fallback = why.Error()
	}
	return res, ep.Close()
}

// h6Gone: rank 1 leaves (reports and exits) in the middle of a rendezvous
// with rank 0. Surviving sender: rank 0's request-to-send is out (push:
// rank 1 answered it before leaving). Surviving receiver: rank 1's
// request-to-send is out, and rank 0 receives it once rank 1 has exited.
func h6Gone(r *launch.Rank, ep *sm.Endpoint, par h6Params, buf []byte) (any, error) {
	push := par.Options[cma.KeyMode] == "push"
	if r.ID == 1 {
		if par.Survivor == "receiver" {
			fillH6(buf, 1, 0)
			if _, err := ep.Isend(0, buf); err != nil {
				return nil, err
			}
		}
		if err := r.Barrier(); err != nil {
			return nil, err
		}
		if par.Survivor == "sender" && push {
			if _, err := ep.Irecv(0, buf); err != nil {
				return nil, err
			}
		}
		return h6Result{}, nil // the process exits now, mid-rendezvous
	}
	var req transports.Request
	var err error
	if par.Survivor == "sender" {
		fillH6(buf, 0, 0)
		if req, err = ep.Isend(1, buf); err != nil {
			return nil, err
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	if par.Survivor == "receiver" || push {
		// Meet a process that is gone, not one on its way out.
		if err := sys.WaitProcessExit(r.PIDs[1], 30*time.Second); err != nil {
			return nil, err
		}
	}
	if par.Survivor == "sender" {
		err = ep.Wait(req)
	} else {
		poison(buf)
		_, err = ep.Recv(1, buf)
	}
	switch {
	case err == nil && par.Survivor == "receiver":
		want := make([]byte, len(buf))
		fillH6(want, 1, 0)
		return nil, fmt.Errorf("%s: a receive from exited rank 1 reported success; first bad byte at %d", corruptionMarker, firstDiff(buf, want))
	case err == nil:
		return nil, fmt.Errorf("%s: a send to exited rank 1 reported success: the data went nowhere", corruptionMarker)
	case !strings.Contains(err.Error(), "rank 1"):
		return nil, fmt.Errorf("the survivor's error does not name the peer: %w", err)
	case errors.Is(err, sys.ErrNotSupported):
		return nil, fmt.Errorf("the survivor's error blames support, not the peer: %w", err)
	}
	return h6Result{Error: err.Error()}, nil
}

func fillH6(b []byte, from, i int) {
	for k := range b {
		b[k] = byte(from*101 + i*13 + k*7 + k>>10)
	}
}

// poison marks a receive buffer, so that a copy that never happened shows.
func poison(b []byte) {
	for k := range b {
		b[k] = 0xA5
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
