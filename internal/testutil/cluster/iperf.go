package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Iperf is one iperf3 TCP measurement.
type Iperf struct {
	Server, Client string  // hosts ("root" is the root namespace)
	Target         string  // the address the client connected to
	BitsPerSecond  float64 // received by the server, over the whole test
	Retransmits    int
	Seconds        float64
}

// IperfAvailable reports why iperf3 cannot run here (nil: it can).
func IperfAvailable() error {
	if _, err := exec.LookPath("iperf3"); err != nil {
		return fmt.Errorf("iperf3 (Debian: iperf3): %w", err)
	}
	if _, err := exec.LookPath("ss"); err != nil {
		return fmt.Errorf("ss (Debian: iproute2): %w", err)
	}
	return nil
}

// Iperf3 runs an iperf3 server on host server and its client on host
// client for secs seconds (extra: more client arguments, as -P 4), and
// returns what the server received. On one host the client connects to
// 127.0.0.1 (loopback), otherwise to the server's address over the
// bridge. The server listens on a port of the slot's own, and the client
// starts once the server's socket listens (polled with ss).
func (c *Cluster) Iperf3(ctx context.Context, server, client string, secs int, extra ...string) (Iperf, error) {
	r := Iperf{Server: server, Client: client}
	sh, err := c.Host(server)
	if err != nil {
		return r, err
	}
	ch, err := c.Host(client)
	if err != nil {
		return r, err
	}
	r.Target = sh.Addr
	if sh.Name == ch.Name {
		r.Target = "127.0.0.1"
	}
	port := strconv.Itoa(25201 + c.Slot)
	srv := sh.Command(ctx, "iperf3", "--server", "--one-off", "--port", port)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return r, fmt.Errorf("iperf3 server on %s: %w", server, err)
	}
	defer func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}()
	exited := make(chan struct{})
	go func() {
		// A server that exits before listening (port taken) ends the poll.
		for {
			if _, err := stat(srv.Process.Pid); err != nil {
				close(exited)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	if err := poll(ctx, 10*time.Second, func() error {
		select {
		case <-exited:
			return errors.New("exited")
		default:
		}
		out, err := sh.Command(ctx, "ss", "-Hltn", "sport = :"+port).Output()
		if err != nil {
			return fmt.Errorf("ss: %w", err)
		}
		if len(strings.TrimSpace(string(out))) == 0 {
			return errors.New("not listening yet")
		}
		return nil
	}); err != nil {
		return r, fmt.Errorf("iperf3 server on %s port %s: %w: %s", server, port, err, srvOut.String())
	}
	args := append([]string{"--client", r.Target, "--port", port, "--time", strconv.Itoa(secs), "--json"}, extra...)
	out, err := ch.Command(ctx, "iperf3", args...).Output()
	if err != nil {
		return r, fmt.Errorf("iperf3 %s on %s: %w: %s", strings.Join(args, " "), client, err, out)
	}
	return r, r.parse(out)
}

// parse reads iperf3 --json's totals (end.sum_received, end.sum_sent's
// retransmits); an "error" in it is the error.
func (r *Iperf) parse(b []byte) error {
	var j struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				Seconds       float64 `json:"seconds"`
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("iperf3 --json: %w", err)
	}
	if j.Error != "" {
		return fmt.Errorf("iperf3: %s", j.Error)
	}
	if j.End.SumReceived.BitsPerSecond <= 0 {
		return errors.New("iperf3 --json: no end.sum_received.bits_per_second")
	}
	r.BitsPerSecond = j.End.SumReceived.BitsPerSecond
	r.Seconds = j.End.SumReceived.Seconds
	r.Retransmits = j.End.SumSent.Retransmits
	return nil
}
