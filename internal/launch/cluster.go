package launch

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gotune/gotune/internal/atomicfile"
	"github.com/gotune/gotune/internal/sys"
)

// active is the cluster this process coordinates, if any: Run places the
// ranks of a job with Nodes > 1 through it.
var active atomic.Pointer[Cluster]

// Cluster is the coordinator's view of a job started by an external
// launcher (mpirun, srun): one gotune process per launcher rank, grouped
// into nodes by host name. Launcher rank 0 coordinates: it runs the plan,
// and every Run starts its ranks as children of this process (node 0) or
// of the node agent of another node (the lowest launcher rank on that
// host; the others on a host stay idle until the end). Ranks of every node
// bootstrap with the coordinator over TCP, presenting the job token.
type Cluster struct {
	ip    string // this process's IP on the bootstrap network
	token string
	ln    net.Listener
	nodes []*clusterNode // node 0 is this process's

	mu     sync.Mutex
	agents []*agentLink       // every other launcher process, joined
	jobs   map[int]*remoteJob // by job number, while it runs
	byRun  map[*running]int   // job number of each running job
	seq    int
	closed bool
}

type clusterNode struct {
	host  string
	addr  string     // IP on the bootstrap network
	agent *agentLink // nil for node 0 (this process)
}

// remoteJob is a job's ranks on other nodes: which are still running.
type remoteJob struct {
	run     *running
	pending map[int]*agentLink // rank → the agent it runs under, until it exits
}

// agentLink is the control connection of one launcher process.
type agentLink struct {
	lrank int
	host  string
	addr  string
	conn  net.Conn
	dec   *json.Decoder
	mu    sync.Mutex // serialises writes
	enc   *json.Encoder
}

func (a *agentLink) send(m ctl) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.enc.Encode(m)
}

// ctl is a control message between the coordinator and a node agent (JSON
// lines). Coordinator to agent: start, signal, kill, exit. Agent to
// coordinator: join, started, exited, output, beat.
type ctl struct {
	Op           string        `json:"op"`
	Token        string        `json:"token,omitempty"`   // join, start
	LRank        int           `json:"lrank,omitempty"`   // join: launcher rank
	Host         string        `json:"host,omitempty"`    // join
	Job          int           `json:"job,omitempty"`     // every per-job message
	Ranks        []int         `json:"ranks,omitempty"`   // start
	Size         int           `json:"size,omitempty"`    // start
	Boot         string        `json:"boot,omitempty"`    // start: the ranks' bootstrap address
	SegmentBytes int           `json:"segment,omitempty"` // start
	Stall        time.Duration `json:"stall,omitempty"`   // start: how often beats matter
	Rank         int           `json:"rank,omitempty"`    // started, exited, output, beat, signal
	PID          int           `json:"pid,omitempty"`     // started
	Signal       int           `json:"signal,omitempty"`  // signal; exited: killed by
	Status       string        `json:"status,omitempty"`  // exited: how it failed ("" = success)
	Data         []byte        `json:"data,omitempty"`    // output
	Beat         uint64        `json:"beat,omitempty"`    // beat
}

// ClusterConfig says how the processes of one launcher job find each other.
type ClusterConfig struct {
	LRank, LSize int    // this process's launcher rank and the launcher job's size
	Host         string // this node's name (default os.Hostname)
	// Addr is the coordinator's address: "host:port" to listen on (launcher
	// rank 0) or to dial (the others). Empty: rank 0 listens on an address
	// of its own (BindIP, port 0) and publishes it with the token in
	// RendezvousFile.
	Addr string
	// Token is the job's secret when Addr is given (every process must be
	// given the same); empty with a rendezvous file: rank 0 makes one.
	Token string
	// RendezvousFile is where rank 0 publishes address and token (mode
	// 0600, renamed into place) and the others read them: a path on a
	// file system every node shares, unique to the launcher job.
	RendezvousFile string
	BindIP         string        // IP rank 0 listens on (default: PickIP)
	Timeout        time.Duration // for every process to join (default 2 minutes)
}

func (c *ClusterConfig) defaults() error {
	if c.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("cluster: host name: %w", err)
		}
		c.Host = h
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.LSize < 1 || c.LRank < 0 || c.LRank >= c.LSize {
		return fmt.Errorf("cluster: launcher rank %d of %d", c.LRank, c.LSize)
	}
	if c.Addr == "" && c.RendezvousFile == "" {
		return errors.New("cluster: neither a coordinator address nor a rendezvous file")
	}
	if c.Addr != "" && c.Token == "" {
		return errors.New("cluster: a coordinator address needs the job token too")
	}
	return nil
}

// Coordinate is launcher rank 0's side: it listens, waits for every other
// launcher process to join, and makes the cluster the one Run places jobs
// on. Close it when the plan is done: that releases the node agents.
func Coordinate(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	token := cfg.Token
	if token == "" {
		var err error
		if token, err = randomToken(); err != nil {
			return nil, err
		}
	}
	listenAt := cfg.Addr
	if listenAt == "" {
		ip := cfg.BindIP
		if ip == "" {
			ip = PickIP()
		}
		listenAt = net.JoinHostPort(ip, "0")
	}
	ln, err := net.Listen("tcp", listenAt)
	if err != nil {
		return nil, fmt.Errorf("cluster: coordinator listener: %w", err)
	}
	ip, _, _ := net.SplitHostPort(ln.Addr().String())
	c := &Cluster{ip: ip, token: token, ln: ln, jobs: map[int]*remoteJob{}, byRun: map[*running]int{}}
	if cfg.Addr == "" {
		if err := publishRendezvous(cfg.RendezvousFile, ln.Addr().String(), token); err != nil {
			ln.Close()
			return nil, err
		}
		defer os.Remove(cfg.RendezvousFile) // every process has read it once all joined
	}
	if err := c.gather(ctx, cfg); err != nil {
		c.Close()
		return nil, err
	}
	active.Store(c)
	return c, nil
}

// gather accepts the other launcher processes until all have joined.
func (c *Cluster) gather(ctx context.Context, cfg ClusterConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.ln.(*net.TCPListener).SetDeadline(time.Now()) })
	defer stop()
	joined := make(map[int]*agentLink)
	for len(joined) < cfg.LSize-1 {
		conn, err := c.ln.Accept()
		if err != nil {
			switch {
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				return fmt.Errorf("cluster: %d of %d launcher processes joined within %v", len(joined)+1, cfg.LSize, cfg.Timeout)
			case ctx.Err() != nil:
				// The job was stopped: the launcher (mpirun, srun) ends the
				// rest of its ranks when one of them dies.
				return fmt.Errorf("cluster: stopped with %d of %d launcher processes (the launcher's ranks) joined: %w", len(joined)+1, cfg.LSize, context.Cause(ctx))
			}
			return fmt.Errorf("cluster: accept: %w", err)
		}
		a, err := c.admit(conn, cfg.LSize)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gotune cluster: refused %s: %v\n", conn.RemoteAddr(), err)
			conn.Close()
			continue
		}
		if joined[a.lrank] != nil {
			conn.Close()
			return fmt.Errorf("cluster: launcher rank %d joined twice", a.lrank)
		}
		joined[a.lrank] = a
	}
	c.ln.(*net.TCPListener).SetDeadline(time.Time{})
	// Node 0 is this host; the others in the order of their lowest launcher
	// rank, whose process is the node's agent.
	c.nodes = []*clusterNode{{host: cfg.Host, addr: c.ip}}
	for lr := range cfg.LSize {
		a := joined[lr]
		if a == nil {
			continue
		}
		c.agents = append(c.agents, a)
		if !slices.ContainsFunc(c.nodes, func(n *clusterNode) bool { return n.host == a.host }) {
			c.nodes = append(c.nodes, &clusterNode{host: a.host, addr: a.addr, agent: a})
		}
	}
	for _, a := range c.agents {
		go c.listen(a)
	}
	return nil
}

// admit reads a join and checks its token and rank.
func (c *Cluster) admit(conn net.Conn, size int) (*agentLink, error) {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	a := &agentLink{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn)), enc: json.NewEncoder(conn)}
	var m ctl
	if err := a.dec.Decode(&m); err != nil || m.Op != "join" {
		return nil, fmt.Errorf("bad join (%v, op %q)", err, m.Op)
	}
	if subtle.ConstantTimeCompare([]byte(m.Token), []byte(c.token)) != 1 {
		return nil, errors.New("wrong job token")
	}
	if m.LRank < 1 || m.LRank >= size || m.Host == "" {
		return nil, fmt.Errorf("join as launcher rank %d of %d on host %q", m.LRank, size, m.Host)
	}
	conn.SetReadDeadline(time.Time{})
	ip, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
	a.lrank, a.host, a.addr = m.LRank, m.Host, ip
	return a, nil
}

// Nodes names the cluster's nodes; node 0 is the coordinator's.
func (c *Cluster) Nodes() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.host
	}
	return out
}

// Close releases every node agent (they exit) and stops placing jobs.
func (c *Cluster) Close() error {
	active.CompareAndSwap(c, nil)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	agents := c.agents
	c.mu.Unlock()
	for _, a := range agents {
		a.send(ctl{Op: "exit"})
		a.conn.Close()
	}
	return c.ln.Close()
}

// place puts a job's ranks on nodes: rank r on node r/ceil(size/nodes).
func (c *Cluster) place(job Job) ([]int, error) {
	nodes := make([]int, job.Size)
	if job.Nodes <= 1 {
		return nodes, nil
	}
	have := 1
	if c != nil {
		have = len(c.nodes)
	}
	if job.Nodes > have {
		return nil, &sys.NotSupportedError{What: fmt.Sprintf("%s on %d nodes", job.Kind, job.Nodes),
			Reason: fmt.Sprintf("the job has %d node(s) (start gotune with mpirun or srun and --launcher to use several)", have)}
	}
	if job.Nodes > job.Size {
		return nil, fmt.Errorf("launch %s: %d ranks cannot span %d nodes", job.Kind, job.Size, job.Nodes)
	}
	per := (job.Size + job.Nodes - 1) / job.Nodes
	for r := range nodes {
		nodes[r] = r / per
	}
	return nodes, nil
}

// hostsOf names each rank's host and address; nil when all are on node 0.
func (c *Cluster) hostsOf(nodes []int) (hosts, addrs []string) {
	if !slices.ContainsFunc(nodes, func(n int) bool { return n != 0 }) {
		return nil, nil
	}
	for _, n := range nodes {
		hosts = append(hosts, c.nodes[n].host)
		addrs = append(addrs, c.nodes[n].addr)
	}
	return hosts, addrs
}

// startRemote asks the node agents to start the job's ranks that are not
// on node 0; they connect to boot.
func (c *Cluster) startRemote(j *running, boot string) error {
	byNode := map[int][]int{}
	for r, n := range j.node {
		if n != 0 {
			byNode[n] = append(byNode[n], r)
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("cluster closed")
	}
	c.seq++
	id := c.seq
	rj := &remoteJob{run: j, pending: map[int]*agentLink{}}
	for n, ranks := range byNode {
		for _, r := range ranks {
			rj.pending[r] = c.nodes[n].agent
		}
	}
	c.jobs[id], c.byRun[j] = rj, id
	c.mu.Unlock()
	j.exits.Add(len(rj.pending))
	for n, ranks := range byNode {
		a := c.nodes[n].agent
		m := ctl{Op: "start", Job: id, Ranks: ranks, Size: j.size, Boot: boot, Token: j.token,
			SegmentBytes: j.job.SegmentBytes, Stall: j.job.Stall}
		if err := a.send(m); err != nil {
			c.lost(a, fmt.Errorf("node agent on %s: %w", a.host, err))
			return fmt.Errorf("launch %s: start ranks %v on %s: %w", j.job.Kind, ranks, a.host, err)
		}
	}
	return nil
}

// agentsOf lists the agents running ranks of j, with j's job number.
func (c *Cluster) agentsOf(j *running) (int, []*agentLink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.byRun[j]
	if !ok {
		return 0, nil
	}
	var out []*agentLink
	for _, a := range c.jobs[id].pending {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return id, out
}

func (c *Cluster) killRemote(j *running) {
	id, agents := c.agentsOf(j)
	for _, a := range agents {
		a.send(ctl{Op: "kill", Job: id})
	}
}

func (c *Cluster) signalRemote(j *running, r int, sig syscall.Signal) {
	c.mu.Lock()
	id, ok := c.byRun[j]
	var a *agentLink
	if ok {
		a = c.jobs[id].pending[r]
	}
	c.mu.Unlock()
	if a != nil {
		a.send(ctl{Op: "signal", Job: id, Rank: r, Signal: int(sig)})
	}
}

// forget drops a finished job (every rank has exited).
func (c *Cluster) forget(j *running) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.byRun[j]; ok {
		delete(c.jobs, id)
		delete(c.byRun, j)
	}
}

// listen reads one agent's reports for as long as its connection lasts.
func (c *Cluster) listen(a *agentLink) {
	for {
		var m ctl
		if err := a.dec.Decode(&m); err != nil {
			c.lost(a, fmt.Errorf("lost the node agent on %s (launcher rank %d): %v", a.host, a.lrank, err))
			return
		}
		c.mu.Lock()
		rj := c.jobs[m.Job]
		c.mu.Unlock()
		if rj == nil {
			continue // a late report of a finished job
		}
		j := rj.run
		switch m.Op {
		case "output":
			j.stderr.Write(m.Data)
			j.stderrTail[m.Rank].Write(m.Data)
		case "beat":
			atomic.StoreUint64(heartbeatWord(j.hb, m.Rank), m.Beat)
		case "started":
			j.mu.Lock()
			j.pidOf[m.Rank] = m.PID
			j.mu.Unlock()
		case "exited":
			var err error
			switch {
			case m.Signal != 0:
				err = &KilledError{Signal: syscall.Signal(m.Signal)}
			case m.Status != "":
				err = errors.New(m.Status)
			}
			c.exited(m.Job, m.Rank, a, fmt.Errorf("on %s: %w", a.host, err), err == nil)
		}
	}
}

// exited records a remote rank's end once.
func (c *Cluster) exited(id, r int, a *agentLink, err error, ok bool) {
	c.mu.Lock()
	rj := c.jobs[id]
	if rj == nil || rj.pending[r] != a {
		c.mu.Unlock()
		return
	}
	delete(rj.pending, r)
	c.mu.Unlock()
	if ok {
		err = nil
	}
	rj.run.remoteExited(r, err)
}

// lost ends every rank an agent was running: its connection is gone.
func (c *Cluster) lost(a *agentLink, err error) {
	c.mu.Lock()
	type gone struct{ id, r int }
	var ended []gone
	for id, rj := range c.jobs {
		for r, x := range rj.pending {
			if x == a {
				ended = append(ended, gone{id, r})
			}
		}
	}
	c.mu.Unlock()
	for _, g := range ended {
		c.exited(g.id, g.r, a, err, false)
	}
}

// PickIP is the address a coordinator listens on by default: the first
// IPv4 address of an interface that is up and not loopback, else loopback.
func PickIP() string {
	ifs, err := net.Interfaces()
	if err == nil {
		for _, i := range ifs {
			if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, _ := i.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
					return n.IP.String()
				}
			}
		}
	}
	return "127.0.0.1"
}

// InterfaceIP resolves an interface name to its first IPv4 address; an IP
// is returned as it is.
func InterfaceIP(s string) (string, error) {
	if ip := net.ParseIP(s); ip != nil {
		return ip.String(), nil
	}
	i, err := net.InterfaceByName(s)
	if err != nil {
		return "", fmt.Errorf("bootstrap address %q: neither an IP nor an interface: %w", s, err)
	}
	addrs, _ := i.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("bootstrap interface %s has no IPv4 address", s)
}

type rendezvous struct {
	Addr  string `json:"addr"`
	Token string `json:"token"`
}

// publishRendezvous writes address and token to path: mode 0600, renamed
// into place so a reader never sees half of it.
func publishRendezvous(path, addr, token string) error {
	b, _ := json.Marshal(rendezvous{Addr: addr, Token: token})
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("cluster: publish rendezvous file: %w", err)
	}
	return nil
}

// readRendezvous waits for rank 0's rendezvous file until ctx ends. A file
// older than this process (another job's, left behind) is not waited on
// forever: it is read, and a connection refused tells.
func readRendezvous(ctx context.Context, path string) (rendezvous, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			var rv rendezvous
			if err := json.Unmarshal(b, &rv); err != nil || rv.Addr == "" || rv.Token == "" {
				return rv, fmt.Errorf("cluster: rendezvous file %s: not address and token (%v)", path, err)
			}
			return rv, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return rendezvous{}, fmt.Errorf("cluster: rendezvous file: %w", err)
		}
		select {
		case <-ctx.Done():
			return rendezvous{}, fmt.Errorf("cluster: launcher rank 0 published no address in %s: %w", path, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// InProcess starts a cluster whose coordinator (this host, by its name)
// and node agents (one per name in hosts) all run in this process: the whole
// protocol with names standing in for hosts, for tests of code that places
// jobs on several nodes. wait closes the cluster and returns the first
// agent's error.
func InProcess(dir string, hosts ...string) (_ *Cluster, wait func() error, _ error) {
	rv := dir + "/job.rendezvous"
	size := len(hosts) + 1
	served := make(chan error, len(hosts))
	for i, h := range hosts {
		go func() {
			served <- Serve(context.Background(), ClusterConfig{LRank: i + 1, LSize: size, Host: h, RendezvousFile: rv, Timeout: time.Minute})
		}()
	}
	c, err := Coordinate(context.Background(), ClusterConfig{LSize: size, RendezvousFile: rv, BindIP: "127.0.0.1", Timeout: time.Minute})
	if err != nil {
		return nil, nil, err
	}
	return c, func() error {
		c.Close()
		var first error
		for range hosts {
			if err := <-served; err != nil && first == nil {
				first = err
			}
		}
		return first
	}, nil
}
