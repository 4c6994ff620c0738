package nccl

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/gotune/gotune/internal/cuda"
	libnccl "github.com/gotune/gotune/internal/nccl"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
)

func init() {
	transports.Register(&transports.Driver{
		Name:          "nccl",
		Options:       []*transports.OptionSet{Options},
		DeviceMemory:  true,
		DeviceDefault: true,
		Collectives:   true,
		SharedBytes:   func(int, transports.Options) (int, error) { return 0, nil },
		New:           New,
		Check:         func(transports.Transport, transports.Env) error { return nil },
		Present:       Present,
	})
}

// Present reports whether NCCL loads and a GPU is there, without a job.
func Present(o transports.Options) error {
	if _, err := Settings(o); err != nil {
		return err
	}
	if _, err := libnccl.Load(); err != nil {
		return err
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("nccl: %w: no CUDA device", transports.ErrNotSupported)
	}
	return nil
}

// Transport is a rank's NCCL communicator, the GPU it binds and the
// stream its operations run on.
type Transport struct {
	lib    *libnccl.Lib
	comm   libnccl.Comm
	dev    *cuda.Device
	stream *cuda.Stream
	rank   int
	size   int // ranks in the communicator
	q      queue
	failed bool // an operation failed: Close aborts instead of destroying
	closed bool
}

// New joins the job's communicator. The rank's goroutine is locked to its
// OS thread (the rank runtime does that): the GPU is bound there, and
// every NCCL call of the rank must come from it.
func New(env transports.Env) (transports.Transport, error) {
	set, err := Settings(env.Options)
	if err != nil {
		return nil, err
	}
	if env.AllGather == nil {
		return nil, errors.New("nccl: the job offers no allgather (transports.Env.AllGather) to hand out NCCL's unique id")
	}
	if err := applySettings(set); err != nil {
		return nil, err
	}
	lib, err := libnccl.Load()
	if err != nil {
		return nil, err
	}
	if err := cuda.Load(); err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	count, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	if count == 0 {
		return nil, fmt.Errorf("nccl: %w: no CUDA device", transports.ErrNotSupported)
	}
	var gpus []int
	if s, ok := env.Options[cudaipc.KeyGPUs]; ok {
		if gpus, err = cuda.ParseOrdinals(s); err != nil {
			return nil, fmt.Errorf("nccl: option %s=%q: %w", cudaipc.KeyGPUs, s, err)
		}
	}
	ordinal := cuda.OrdinalFor(env.Rank, count, gpus)
	if ordinal < 0 || ordinal >= count {
		return nil, fmt.Errorf("nccl: rank %d: GPU %d of %d devices", env.Rank, ordinal, count)
	}
	t := &Transport{lib: lib, rank: env.Rank, size: env.Size}
	if err := t.open(env, ordinal); err != nil {
		return nil, errors.Join(err, t.release())
	}
	return t, nil
}

func (t *Transport) open(env transports.Env, ordinal int) error {
	var err error
	if t.dev, err = cuda.Open(ordinal); err != nil {
		return fmt.Errorf("nccl: rank %d: %w", env.Rank, err)
	}
	if err := t.dev.Bind(); err != nil {
		return fmt.Errorf("nccl: rank %d: %w", env.Rank, err)
	}
	if t.stream, err = cuda.NewStream(cuda.StreamNonBlocking); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	t.q.stream, t.q.dev = t.stream, t.dev
	id, err := t.exchange(env)
	if err != nil {
		return err
	}
	if t.comm, err = t.lib.InitRank(env.Size, env.Rank, id); err != nil {
		return fmt.Errorf("nccl: rank %d on %s: %w", env.Rank, t.dev, err)
	}
	return nil
}

// exchange hands rank 0's unique id to every rank through the job's
// allgather, with every rank's GPU (host and PCI bus id): two ranks on
// one GPU are refused here, before NCCL would refuse them at init; as
// ErrNotSupported where no GPUs were chosen (more ranks than GPUs).
func (t *Transport) exchange(env transports.Env) (libnccl.UniqueID, error) {
	var id libnccl.UniqueID
	host := ""
	if len(env.Hosts) > env.Rank {
		host = env.Hosts[env.Rank]
	}
	blob := []byte(host + "/" + t.dev.PCIBusID + "\n")
	if env.Rank == 0 {
		var err error
		if id, err = t.lib.NewUniqueID(); err != nil {
			return id, fmt.Errorf("nccl: %w", err)
		}
		blob = append(blob, id[:]...)
	}
	all, err := env.AllGather(blob)
	if err != nil {
		return id, fmt.Errorf("nccl: hand out the unique id: %w", err)
	}
	owner := map[string]int{}
	for r, b := range all {
		gpu, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok || (r == 0 && len(rest) != len(id)) {
			return id, fmt.Errorf("nccl: rank %d sent a malformed id message (%d bytes)", r, len(b))
		}
		if prev, dup := owner[string(gpu)]; dup {
			err := fmt.Errorf("nccl: ranks %d and %d both bind GPU %s: NCCL takes one rank per GPU (set --gpus or %s)",
				prev, r, strings.TrimPrefix(string(gpu), "/"), cudaipc.KeyGPUs)
			if _, chosen := env.Options[cudaipc.KeyGPUs]; !chosen {
				// The ranks took the GPUs round robin: the host has fewer
				// GPUs than ranks, which no setting mends.
				err = fmt.Errorf("%w: %w", transports.ErrNotSupported, err)
			}
			return id, err
		}
		owner[string(gpu)] = r
		if r == 0 {
			copy(id[:], rest)
		}
	}
	return id, nil
}

// Name is "nccl".
func (t *Transport) Name() string { return "nccl" }

// GPU is the device the rank bound.
func (t *Transport) GPU() *cuda.Device { return t.dev }

// Close waits for what was launched, then frees the communicator (aborted
// after a failure, which may have left operations that never complete)
// and the rank's CUDA resources.
func (t *Transport) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	if !t.failed {
		errs = append(errs, t.launch())
		for len(t.q.launched) > 0 && !t.failed {
			if err := t.complete(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(append(errs, t.release())...)
}

func (t *Transport) release() error {
	var errs []error
	if t.comm != 0 {
		if t.failed {
			errs = append(errs, t.lib.Abort(t.comm))
		} else {
			errs = append(errs, t.lib.Destroy(t.comm))
		}
		t.comm = 0
	}
	errs = append(errs, t.q.close())
	if t.stream != nil {
		errs = append(errs, t.stream.Destroy())
		t.stream = nil
	}
	if t.dev != nil {
		errs = append(errs, t.dev.Close())
		t.dev = nil
	}
	return errors.Join(errs...)
}
