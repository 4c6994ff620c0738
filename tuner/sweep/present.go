package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/tuner/store"
)

// presence says whether a candidate's transport can run on this node
// without starting a job (the driver's Present: a kernel module's device);
// tests replace it.
var presence = func(driver string, opts transports.Options) error {
	d, err := transports.Lookup(driver)
	if err != nil {
		return err
	}
	if d.Present == nil {
		return nil
	}
	return d.Present(opts)
}

// absence is the record of a candidate not weighed because its transport
// cannot run here.
type absence struct {
	Transport string `json:"transport"`
	Reason    string `json:"reason"`
}

func absentKey(candidate string) string { return "absent:" + candidate }

// presentOnly drops the candidates whose transport is not built in or
// whose device is absent here (ErrNotSupported), each once on record with
// a note: a resumed run and its tune drop the same ones, and a tune
// replaying another node's run keeps what that run measured. Any other
// failure of the look is an error.
func (r *Runner) presentOnly(cands []candidate) ([]candidate, error) {
	var out []candidate
	for _, c := range cands {
		if c.transport == "sm" || c.transport == "auto" {
			out = append(out, c)
			continue
		}
		key := absentKey(c.name)
		if rec, ok := r.store.Get(key); ok {
			var a absence
			if err := json.Unmarshal(rec.Data, &a); err != nil {
				return nil, fmt.Errorf("record %s: %w", key, err)
			}
			r.noteAbsent(c.name, a.Reason)
			continue
		}
		if r.replayOnly {
			out = append(out, c)
			continue
		}
		err := presence(c.transport, c.opts)
		switch {
		case err == nil:
			out = append(out, c)
			continue
		case !errors.Is(err, transports.ErrNotSupported) && !isUnknownTransport(c.transport):
			return nil, fmt.Errorf("candidate %s: %w", c.name, err)
		}
		data, _ := json.Marshal(absence{Transport: c.transport, Reason: err.Error()}) // plain data always encodes
		if err := r.store.Append(store.Record{Key: key, Kind: "absent", Time: time.Now().UTC(), Data: data}); err != nil {
			return nil, err
		}
		r.noteAbsent(c.name, err.Error())
	}
	return out, nil
}

// isUnknownTransport: the build lacks the driver.
func isUnknownTransport(driver string) bool {
	_, err := transports.Lookup(driver)
	return err != nil
}

func (r *Runner) noteAbsent(name, why string) {
	note := fmt.Sprintf("%s not weighed: %s", name, why)
	for _, n := range r.notes {
		if n == note {
			return
		}
	}
	r.notes = append(r.notes, note)
}
