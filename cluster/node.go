package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/labstack/echo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/chorusrt/chorus/internal/actorkit"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/telemetry"
)

// Config configures a node.
type Config struct {
	// Name is the cluster's name; nodes of different names never talk.
	Name string
	// Bind is this node's actor address, host:port (gRPC). The membership
	// health endpoint listens on MembershipPort of the same host.
	Bind string
	// Advertise is the address (host:port) the other members and clients
	// dial to reach this node, when it is not Bind: a container's mapped
	// port, an address behind NAT, a proxy in front of the node. The node
	// is known by it (Address, Members), and its membership endpoint is
	// its port plus MembershipOffset, forwarded to Bind's likewise.
	// Empty: Bind.
	Advertise string
	// Peers are the actor addresses (host:port) of the cluster's members,
	// this node's own included or not: the static member list. Each peer's
	// membership endpoint is its port plus one unless MembershipOffset says
	// otherwise.
	Peers []string
	// MembershipOffset is added to an actor port to get its membership
	// (health) port; default 1.
	MembershipOffset int
	// Membership replaces the static member list with another Proto.Actor
	// cluster provider: Kubernetes (cluster/clusterproviders/k8s), Consul
	// (consul), etcd (etcd), ... Peers and MembershipOffset are then unused.
	// Nil: automanaged over Peers.
	Membership pcluster.ClusterProvider
	// Client joins without hosting anything: the node calls the cluster
	// (sessions, streams, batches) but runs no model call, session or
	// budget. A batch coordinator is a client.
	Client bool
	// Runtime configures the node's local runtime (providers, limits...).
	// Every member must register the same provider keys: budgets are
	// shared by key.
	Runtime []runtime.Option
	// Sessions, when set, makes the node host sessions. Its Journal must
	// implement store.LeasingJournal (store.Postgres: shared by the
	// nodes); Model is set to the node's runtime when nil. Every member
	// must register the same tools.
	Sessions *session.Options
	// LeaseTTL is how long a session's lease lasts without renewal
	// (default 3s): how soon a dead node's sessions move.
	LeaseTTL time.Duration
	// RefreshInterval is how often membership is checked (default 500ms).
	RefreshInterval time.Duration
	// Logger receives Chorus's and Proto.Actor's log lines (default: none).
	Logger *slog.Logger
	// Telemetry traces session calls: a CLIENT span on the calling node,
	// a SERVER span on the session's node, one trace (sessiontrace.go).
	// Nil: Sessions.Telemetry, else the global providers.
	Telemetry *telemetry.Telemetry

	// dial, when set (tests), opens the node's outgoing actor connections
	// (gRPC) instead of a plain TCP dial: a test routes each link through
	// a fault proxy of its own.
	dial func(ctx context.Context, addr string) (net.Conn, error)
	// clock, when set (tests), is the node's clock, skewed from the real
	// one: see Node.toWire for where a node's clock matters.
	clock func() time.Time
}

// Node is one member (or client) of a Chorus cluster.
type Node struct {
	cfg    Config
	log    *slog.Logger
	sys    *actor.ActorSystem
	cl     *pcluster.Cluster
	rt     *runtime.Runtime
	addr   string
	worker *actor.PID

	budgets  *budgets
	sessions *sessionHost
	telOnce  sync.Once
	tel      *telemetry.Telemetry

	streamID atomic.Uint64
	rr       atomic.Uint64

	// calls are the whole-answer calls served here, by call id, for the
	// callers' CallCancel.
	callsMu sync.Mutex
	calls   map[uint64]context.CancelFunc

	// members is the live membership, copied from each ClusterTopology
	// event as Proto.Actor publishes it (its own member list is read
	// without a lock and races with its updates).
	mmu     sync.RWMutex
	members []string
	// pids caches grain activations (Proto.Actor's identity lookup asks
	// the owner member on every Get): dropped on every topology change and
	// per grain when it is found dead.
	pids map[string]*actor.PID

	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// gate guards wg against an Add after Close began waiting.
	gate    sync.Mutex
	leaving bool

	// endpoints are the addresses this node's remote connected to (its
	// endpoint writers), closed one by one before the remote stops
	// (closeEndpoints).
	emu       sync.Mutex
	endpoints map[string]int // connects per address

	closeOnce sync.Once
	closeErr  error

	// sent, when set (tests), is told of every batch a producer on this
	// node sends, and of its end (seq 0).
	sent func(stream, seq uint64)
}

const (
	kindBudget  = "chorus-budget"
	kindSession = "chorus-session"
	workerName  = "chorus-worker"
)

// Join starts a node and joins the cluster cfg.Name. It returns once the
// node serves (about a second: Proto.Actor's start-up), and other members
// are found as they come (WaitMembers waits for them). A ctx already done
// joins nothing.
func Join(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 3 * time.Second
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = 500 * time.Millisecond
	}
	if cfg.MembershipOffset == 0 {
		cfg.MembershipOffset = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, log: log}
	n.base, n.cancel = context.WithCancel(context.Background())

	host, port, _ := splitHostPort(cfg.Bind)
	advHost, advPort := host, port
	if cfg.Advertise != "" {
		advHost, advPort, _ = splitHostPort(cfg.Advertise)
	}
	l := log.With(slog.String("component", "protoactor"))
	// The node owns its actor system, unlike a runtime or a session
	// manager, which share the process's: Proto.Actor's remote and cluster
	// attach to one system and one address, and the cluster's Shutdown
	// shuts the system down. The node's runtime and sessions live in it.
	n.sys = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return l }),
		actor.WithDeadLetterThrottleCount(0),
	)
	if !cfg.Client {
		n.budgets = newBudgets(n)
		// 64-event streams (the runtime's default is 16): a remote stream's
		// producer batches what its stream has ready (gather), and 16
		// measured 28% more allocations per delta (BenchmarkRemoteStream).
		ropts := append([]runtime.Option{runtime.WithLogger(log), runtime.WithStreamBuffer(64)}, cfg.Runtime...)
		ropts = append(ropts, runtime.WithSharedBudget(n.budgets.admitter), actorkit.RuntimeOption[runtime.Option](actorkit.Borrow(n.sys)))
		rt, err := runtime.New(ropts...)
		if err != nil {
			n.sys.Shutdown()
			n.cancel()
			return nil, err
		}
		n.rt = rt
	}
	var kinds []*pcluster.Kind
	if !cfg.Client {
		kinds = append(kinds, pcluster.NewKind(kindBudget, n.budgets.props()))
		if cfg.Sessions != nil {
			sh, err := newSessionHost(n, *cfg.Sessions)
			if err != nil {
				n.shutdownLocal()
				return nil, err
			}
			n.sessions = sh
			kinds = append(kinds, pcluster.NewKind(kindSession, sh.props()))
		}
	}
	hosts := make([]string, 0, len(cfg.Peers)+1)
	seen := map[string]bool{}
	// A member checks its own health at Bind: a peer list that names its
	// advertised address (one list for every member) does not count it
	// twice, nor make it depend on the way in that others use.
	for _, p := range append([]string{cfg.Bind}, cfg.Peers...) {
		if cfg.Client && p == cfg.Bind || cfg.Advertise != "" && p == cfg.Advertise {
			continue
		}
		h, pp, _ := splitHostPort(p)
		m := net.JoinHostPort(h, strconv.Itoa(pp+cfg.MembershipOffset))
		if !seen[m] {
			seen[m] = true
			hosts = append(hosts, m)
		}
	}
	var provider pcluster.ClusterProvider = cfg.Membership
	if provider == nil {
		p, err := n.automanaged(host, port, advHost, advPort, hosts)
		if err != nil {
			n.shutdownLocal()
			return nil, err
		}
		provider = p
	}
	var ropts []remote.ConfigOption
	if cfg.Advertise != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(cfg.Advertise))
	}
	if cfg.dial != nil {
		ropts = append(ropts, remote.WithDialOptions(
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(cfg.dial),
		))
	}
	rcfg := remote.Configure(host, port, ropts...)
	ccfg := pcluster.Configure(cfg.Name, provider, disthash.New(), rcfg,
		pcluster.WithKinds(kinds...),
		pcluster.WithRequestTimeout(10*time.Second),
		pcluster.WithHeartbeatExpiration(5*time.Second),
	)
	n.cl = pcluster.New(n.sys, ccfg)
	n.sys.EventStream.Subscribe(func(evt any) {
		if c, ok := evt.(*remote.EndpointConnectedEvent); ok {
			n.emu.Lock()
			if n.endpoints == nil {
				n.endpoints = map[string]int{}
			}
			n.endpoints[c.Address]++
			n.emu.Unlock()
			return
		}
		t, ok := evt.(*pcluster.ClusterTopology)
		if !ok {
			return
		}
		addrs := make([]string, 0, len(t.Members))
		for _, m := range t.Members {
			addrs = append(addrs, m.Address())
		}
		n.mmu.Lock()
		n.members = addrs
		n.pids = nil
		n.mmu.Unlock()
	})
	if err := n.start(); err != nil {
		_ = provider.Shutdown(false) // closes the membership listener
		n.stopRemote()               // a start that failed after the remote's did
		n.shutdownLocal()
		return nil, err
	}
	n.addr = n.sys.Address()
	w, err := n.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &workerActor{n: n} }), workerName)
	if err != nil {
		n.stopCluster()
		n.shutdownLocal()
		return nil, fmt.Errorf("cluster: spawn worker: %w", err)
	}
	n.worker = w
	if n.sessions != nil {
		n.sessions.start()
	}
	return n, nil
}

// automanaged is the default membership: automanaged's own HTTP health
// check, but listening on the bind host only (automanaged alone listens on
// every interface) and without echo's start-up banner on stdout. The node
// it reports is the advertised address.
func (n *Node) automanaged(host string, port int, advHost string, advPort int, hosts []string) (pcluster.ClusterProvider, error) {
	cfg := n.cfg
	mport := port + cfg.MembershipOffset
	health := echo.New()
	health.HideBanner, health.HidePort = true, true
	if !cfg.Client {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(mport)))
		if err != nil {
			return nil, fmt.Errorf("cluster: membership port: %w", err)
		}
		health.Listener = ln
		health.GET("/_health", func(c echo.Context) error {
			return c.JSON(http.StatusOK, automanaged.NewNode(cfg.Name, n.sys.ID, advHost, advPort, advPort+cfg.MembershipOffset, n.cl.GetClusterKinds()))
		})
	}
	return automanaged.NewWithTesting(cfg.RefreshInterval, mport, health, hosts...), nil
}

// start starts the member (or client). Proto.Actor panics on a failed
// start (a taken port); that becomes an error here.
func (n *Node) start() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cluster: start %s: %v", n.cfg.Bind, r)
		}
	}()
	if n.cfg.Client {
		n.cl.StartClient()
	} else {
		n.cl.StartMember()
	}
	return nil
}

func (c *Config) validate() error {
	if c.Name == "" {
		return &llm.ConfigError{Field: "cluster.Name", Msg: "must not be empty"}
	}
	if _, _, err := splitHostPort(c.Bind); err != nil {
		return &llm.ConfigError{Field: "cluster.Bind", Msg: err.Error()}
	}
	if c.Advertise != "" {
		if _, _, err := splitHostPort(c.Advertise); err != nil {
			return &llm.ConfigError{Field: "cluster.Advertise", Msg: err.Error()}
		}
	}
	for i, p := range c.Peers {
		if _, _, err := splitHostPort(p); err != nil {
			return &llm.ConfigError{Field: fmt.Sprintf("cluster.Peers[%d]", i), Msg: err.Error()}
		}
	}
	if c.Client && len(c.Peers) == 0 && c.Membership == nil {
		return &llm.ConfigError{Field: "cluster.Peers", Msg: "a client needs at least one member to talk to"}
	}
	if c.Client && c.Sessions != nil {
		return &llm.ConfigError{Field: "cluster.Sessions", Msg: "a client hosts no sessions"}
	}
	if c.MembershipOffset < 0 {
		return &llm.ConfigError{Field: "cluster.MembershipOffset", Msg: "must not be negative"}
	}
	return nil
}

func splitHostPort(a string) (string, int, error) {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port", a)
	}
	if h == "" {
		return "", 0, fmt.Errorf("%q has no host", a)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65534 {
		return "", 0, fmt.Errorf("%q has no valid port", a)
	}
	return h, port, nil
}

// Address is the node's actor address (host:port).
func (n *Node) Address() string { return n.addr }

// Runtime is the node's local runtime. Its credentials' admissions go to
// the credentials' budget owners in the cluster. Nil on a client.
func (n *Node) Runtime() *runtime.Runtime { return n.rt }

// Members lists the actor addresses of the cluster's live members, sorted
// as the membership has them.
func (n *Node) Members() []string {
	n.mmu.RLock()
	defer n.mmu.RUnlock()
	return append([]string(nil), n.members...)
}

// enter registers a goroutine of the node; false once Close began.
func (n *Node) enter() bool {
	n.gate.Lock()
	defer n.gate.Unlock()
	if n.leaving {
		return false
	}
	n.wg.Add(1)
	return true
}

// ErrClosed is the error of a call on a node that is closing or closed.
var ErrClosed = errors.New("cluster: node closed")

// grain returns the PID of the grain identity of kind, activating it.
func (n *Node) grain(identity, kind string) *actor.PID {
	key := kind + "/" + identity
	n.mmu.RLock()
	pid := n.pids[key]
	n.mmu.RUnlock()
	if pid != nil {
		return pid
	}
	pid = n.cl.Get(identity, kind)
	if pid == nil {
		return nil
	}
	n.mmu.Lock()
	if n.pids == nil || len(n.pids) > 100_000 {
		n.pids = map[string]*actor.PID{}
	}
	n.pids[key] = pid
	n.mmu.Unlock()
	return pid
}

// forget drops a grain's cached PID once it was found dead.
func (n *Node) forget(identity, kind string, pid *actor.PID) {
	key := kind + "/" + identity
	n.mmu.Lock()
	if p := n.pids[key]; p != nil && p.Equal(pid) {
		delete(n.pids, key)
	}
	n.mmu.Unlock()
	n.cl.PidCache.RemoveByValue(identity, kind, pid)
}

// WaitMembers waits until the cluster has at least k live members.
func (n *Node) WaitMembers(ctx context.Context, k int) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if len(n.Members()) >= k {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d of %d members: %w", len(n.Members()), k, ctx.Err())
		case <-t.C:
		}
	}
}

// Close leaves the cluster: sessions hosted here are passivated (their
// leases released, so that another node takes them at once), in-flight
// calls end, and the node's actors stop.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		if n.sessions != nil {
			n.sessions.close(ctx)
		}
		n.gate.Lock()
		n.leaving = true
		n.gate.Unlock()
		n.cancel()
		n.wg.Wait()
		if n.rt != nil {
			n.closeErr = n.rt.Close(ctx)
		}
		n.stopCluster()
	})
	return n.closeErr
}

// stopCluster leaves the cluster. A member leaves gracefully (gossiping
// that it left, so others drop it at once); a client, which never
// gossiped, just stops its remote and its membership polling.
//
// Proto.Actor can panic while leaving (on some half-started or
// half-stopped states); the panic is logged, and whatever happened before
// it, the remote's gRPC server is then stopped outright, so that its
// listener and accept loop never outlive the node. A graceful leave that
// got as far as stopping the server makes that a no-op.
func (n *Node) stopCluster() {
	defer n.stopRemote()
	defer func() {
		if r := recover(); r != nil {
			n.log.Warn("cluster: Proto.Actor panicked while leaving", slog.String("node", n.cfg.Bind), slog.Any("panic", r))
		}
	}()
	leaveCluster(n)
}

// leaveCluster is the leave itself, a variable so that a test can make it
// panic the way Proto.Actor does.
//
// It is Proto.Actor's graceful Cluster.Shutdown step for step but for its
// last, the remote's graceful Shutdown, which stops the endpoint manager:
// that sets the manager's connection map to nil while the receive
// goroutine of a connection that just broke (a peer leaving at the same
// moment, a link cut) may still publish its EndpointTerminatedEvent, whose
// handler then reads the nil map and panics in that goroutine, beyond any
// recover, killing the process. Here the endpoint manager is never
// stopped: each connection the remote opened is closed through the
// manager while its map is alive (closeEndpoints), then the gRPC server
// stops. No goroutine can reach the nil map, because it is never nil
// (TestCloseNeverPanics).
var leaveCluster = func(n *Node) {
	c := n.cl
	if !n.cfg.Client {
		c.Gossip.SetState(pcluster.GracefullyLeftKey, &emptypb.Empty{})
		c.ActorSystem.Shutdown()
		_ = c.Config.ClusterProvider.Shutdown(true)
		c.IdentityLookup.Shutdown()
		time.Sleep(2 * time.Second) // Proto.Actor's wait for ownership to move
		c.Gossip.Shutdown()
	} else {
		_ = c.Config.ClusterProvider.Shutdown(true)
		n.sys.Shutdown()
	}
	n.closeEndpoints()
	c.Remote.Shutdown(false)
}

// closeEndpoints closes every connection the remote opened, the way the
// remote closes one whose peer went away (an EndpointTerminatedEvent:
// the manager forgets it and stops its writer, which closes the gRPC
// connection), and waits a moment for each writer's receive goroutine to
// see its stream end. A connection opened meanwhile is closed by the next
// round.
func (n *Node) closeEndpoints() {
	closed := map[string]int{}
	for range 5 {
		n.emu.Lock()
		open := map[string]int{}
		for a, k := range n.endpoints {
			if k > closed[a] {
				open[a] = k
			}
		}
		n.emu.Unlock()
		if len(open) == 0 {
			return
		}
		for a, k := range open {
			closed[a] = k
			n.sys.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: a})
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopRemote stops the remote's gRPC server at once (Proto.Actor's
// non-graceful Shutdown is that alone). It recovers too: a remote that
// never started has no server to stop.
func (n *Node) stopRemote() {
	defer func() { _ = recover() }()
	if n.cl != nil && n.cl.Remote != nil {
		n.cl.Remote.Shutdown(false)
	}
}

func (n *Node) shutdownLocal() {
	n.cancel()
	if n.sessions != nil {
		n.sessions.shutdown()
	}
	if n.rt != nil {
		_ = n.rt.Close(context.Background())
	}
	n.sys.Shutdown()
}

// LocalAddrs returns k distinct loopback actor addresses (127.0.0.1:port)
// whose port and port+1 (the membership port) are free now, for a cluster
// on one machine or a client that names no address. Free now is no
// promise: another process may take a port first, and Join then fails
// naming it.
//
// Pairs are drawn at random below Linux's ephemeral range (32768 and up),
// where outgoing connections never take a local port: a machine busy with
// thousands of loopback connections holds most ephemeral ports next to a
// free one. Only when that fails are ephemeral pairs tried.
func LocalAddrs(k int) ([]string, error) {
	var out []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	pair := func(port int) bool {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return false
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+1))
		if err != nil {
			l.Close()
			return false
		}
		held = append(held, l, l2) // held until all are chosen: none is picked twice
		out = append(out, "127.0.0.1:"+strconv.Itoa(port))
		return true
	}
	for tries := 0; len(out) < k && tries < 100*k; tries++ {
		pair(20000 + int(randUint64()%12000))
	}
	for tries := 0; len(out) < k; tries++ {
		if tries > 100*k {
			return nil, errors.New("cluster: no free port pairs on 127.0.0.1")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l) // an ephemeral port whose neighbour is taken is not offered again
		if port := l.Addr().(*net.TCPAddr).Port; port+1 <= 65534 {
			pair(port + 1)
		}
	}
	return out, nil
}

// randUint64 returns a random non-zero number.
func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// newToken returns a random hex token.
func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var errNoMembers = errors.New("cluster: no live member to run the call")
