package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The black-box tests build cmd/devhost once, start it as an operator would (the boot
// supervisor with a throwaway data directory on a free loopback port) and speak HTTP to it.
// `kill -9` of the supervisor is a power cut.

var binary, devctl string

// hangGuard bounds every wait of the black-box tests. Each waits on a condition; the bound
// only turns a hang into a failure, so it is far beyond what a loaded machine needs (a first
// `make test` on two busy cores took 45 s for a wait that takes 3 s on a quiet one).
const hangGuard = 5 * time.Minute

// guardCtx is a test's context for its calls to its peers: it ends after n hang guards, or
// with the test.
func guardCtx(t *testing.T, n time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), n*hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func TestMain(m *testing.M) {
	// Every test here builds and runs the real device (with the race detector): none belongs
	// in the fast -short loop.
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping the black-box tests of cmd/devhost under -short")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "devhost-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "devhost")
	// The race detector watches the real device through every black-box flow.
	out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build devhost: %v\n%s", err, out)
		os.Exit(1)
	}
	devctl = filepath.Join(dir, "devctl")
	if out, err := exec.Command("go", "build", "-o", devctl, "../devctl").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build devctl: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lines collects a process's output and lets a test wait for a line.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	all  []string
	cond *sync.Cond
}

func newLines() *lines { l := &lines{}; l.cond = sync.NewCond(&l.mu); return l }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, string(l.buf.Next(i + 1)[:i]))
	}
	l.cond.Broadcast()
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

var listenRE = regexp.MustCompile(`^devhost: listening on (http://\S+)$`)

// waitListening waits for the n-th listening line (one per boot of the app).
func (l *lines) waitListening(t *testing.T, n int, timeout time.Duration) string {
	t.Helper()
	var url string
	l.await(t, timeout, fmt.Sprintf("no listening line #%d", n), func(all []string) bool {
		seen := 0
		for _, s := range all {
			if m := listenRE.FindStringSubmatch(s); m != nil {
				seen++
				if seen == n {
					url = m[1]
					return true
				}
			}
		}
		return false
	})
	return url
}

// await waits until found accepts the output's lines so far (found runs with l.mu held). After
// timeout the test fails with what and the output.
func (l *lines) await(t *testing.T, timeout time.Duration, what string, found func(all []string) bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !condWait(l.cond, timeout, func() bool { return found(l.all) }) {
		t.Fatalf("%s within %v; output:\n%s", what, timeout, strings.Join(l.all, "\n"))
	}
}

type dev struct {
	t      *testing.T
	bin    string // the devhost executable; the one TestMain built when empty
	data   string
	port   int
	args   []string
	env    []string
	cmd    *exec.Cmd
	out    *lines
	base   string
	boots  int // listening lines seen by this supervisor
	key    string
	exited chan error
}

type devOpt func(*dev)

func withArgs(a ...string) devOpt { return func(d *dev) { d.args = append(d.args, a...) } }

func withEnv(kv ...string) devOpt { return func(d *dev) { d.env = append(d.env, kv...) } }

func withBinary(path string) devOpt { return func(d *dev) { d.bin = path } }

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newDev prepares a device with a fresh data directory and a factory document picking a free
// port, and powers it on.
func newDev(t *testing.T, opts ...devOpt) *dev {
	t.Helper()
	d := &dev{t: t, data: t.TempDir(), port: freePort(t)}
	for _, o := range opts {
		o(d)
	}
	// No NTP server (time.server0 defaults to pool.ntp.org): tests send traffic to loopback only.
	factory := filepath.Join(d.data, "..", fmt.Sprintf("factory-%d.json", d.port))
	if err := os.WriteFile(factory, []byte(fmt.Sprintf(`{"httpd":{"port":%d},"time":{"server0":""}}`, d.port)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The development signing key lives in the test's directory, not the user's.
	d.env = append([]string{"DEVHOST_KEYS=" + filepath.Join(d.data, "keys")}, d.env...)
	d.args = append([]string{"--data", filepath.Join(d.data, "flash"), "--factory", factory, "--listen", "127.0.0.1"}, d.args...)
	if !slices.Contains(d.args, "--board") {
		// The default board has no network until WiFi is configured; the flows that need a
		// network from boot get Ethernet up on loopback. Each device gets a setup-portal
		// address of its own (derived from its port), so devices running side by side never
		// share the portal's DNS and DHCP sockets.
		board := filepath.Join(d.data, "..", fmt.Sprintf("board-%d.json", d.port))
		portal := fmt.Sprintf("127.6.%d.%d", d.port>>8&0xff, d.port&0xff|1)
		if err := os.WriteFile(board, []byte(fmt.Sprintf(`{"eth":{"up":true,"ip":"127.0.0.1"},"portal_ip":%q}`, portal)), 0o644); err != nil {
			t.Fatal(err)
		}
		d.args = append(d.args, "--board", board)
	}
	d.powerOn()
	t.Cleanup(d.cleanup)
	return d
}

func (d *dev) powerOn() {
	d.t.Helper()
	d.out = newLines()
	bin := binary
	if d.bin != "" {
		bin = d.bin
	}
	d.cmd = exec.Command(bin, d.args...)
	d.cmd.Env = append(os.Environ(), d.env...)
	d.cmd.Stdout = d.out
	d.cmd.Stderr = d.out
	// An app that outlived its supervisor would hold the output pipe; do not wait for it
	// forever (waitPortFree then reports it).
	d.cmd.WaitDelay = 2 * time.Second
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exited = make(chan error, 1)
	// The exit status, then a closed channel: whoever looks later sees the process gone.
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait(); close(ch) }(d.cmd, d.exited)
	d.boots = 0
	d.waitBoot()
}

// waitBoot waits for the app's next boot to answer requests.
func (d *dev) waitBoot() {
	d.t.Helper()
	d.boots++
	d.base = d.out.waitListening(d.t, d.boots, hangGuard)
}

// reboot asks for a software reboot (POST /system/reboot) and waits for the next boot.
func (d *dev) reboot() {
	d.t.Helper()
	if r := d.call("POST", "/api/v1/system/reboot", ""); r.status != 202 {
		d.t.Fatalf("reboot: %d %s", r.status, r.body)
	}
	d.waitBoot()
}

// shutdown sends SIGTERM to the supervisor and waits up to timeout for it to exit cleanly.
func (d *dev) shutdown(timeout time.Duration) {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Fatalf("supervisor exit after SIGTERM: %v", err)
		}
	case <-time.After(timeout):
		d.t.Fatal("supervisor did not stop after SIGTERM")
	}
}

// powerCut is `kill -9` of the supervisor; the app dies with it.
func (d *dev) powerCut() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	d.waitPortFree()
}

func (d *dev) waitPortFree() {
	d.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", d.port))
		if err == nil {
			ln.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatalf("port %d still busy after power cut: the app outlived its supervisor", d.port)
}

func (d *dev) cleanup() {
	if d.cmd != nil {
		// Only the channel says whether the supervisor is gone: ProcessState belongs to the
		// goroutine that waits for it.
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Signal(syscall.SIGKILL)
			select {
			case <-d.exited:
			case <-time.After(5 * time.Second):
			}
		}
	}
	if strings.Contains(d.out.String(), "WARNING: DATA RACE") {
		d.t.Errorf("the device reported a data race")
	}
	if d.t.Failed() {
		d.t.Logf("device output:\n%s", d.out.String())
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return m
}

var client = &http.Client{Timeout: 10 * time.Second}

// call makes a request with the device's key (if one is set in the test) as Bearer.
func (d *dev) call(method, path, body string, hdr ...string) reply {
	d.t.Helper()
	r, err := d.try(method, path, body, hdr...)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// wakeClient waits as long as the tests' hang guard: a request to a dormant plugin's route
// is answered once a whole instance is loaded, which under -race on a loaded 2-core machine
// can take longer than client's 10 s.
var wakeClient = &http.Client{Timeout: hangGuard}

// callWaking is call for a request that may wake a dormant plugin.
func (d *dev) callWaking(method, path, body string) reply {
	d.t.Helper()
	r, err := d.tryWith(wakeClient, method, path, body)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (d *dev) try(method, path, body string, hdr ...string) (reply, error) {
	return d.tryWith(client, method, path, body, hdr...)
}

func (d *dev) tryWith(c *http.Client, method, path, body string, hdr ...string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.base+path, rd)
	if err != nil {
		return reply{}, err
	}
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	if d.key != "" {
		req.Header.Set("Authorization", "Bearer "+d.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// putConfig sets configuration values with PUT /config and fails the test unless the device
// takes them.
func (d *dev) putConfig(body string) {
	d.t.Helper()
	if r := d.call("PUT", "/api/v1/config", body); r.status != 200 {
		d.t.Fatalf("PUT /config %s: %d %s", body, r.status, r.body)
	}
}

// runTool runs name with args and env added to the test's environment, and answers its
// combined output; an error names the command and carries the output.
func runTool(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// event is one server-sent event of GET /events.
type event struct {
	name string
	data string
}

// events subscribes to GET /events; the channel closes when the stream ends or the test does.
func (d *dev) events() <-chan event {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", d.base+"/api/v1/events", nil)
	if d.key != "" {
		req.Header.Set("Authorization", "Bearer "+d.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		d.t.Fatalf("events: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		cancel()
		_ = resp.Body.Close()
		d.t.Fatalf("events: %d %q", resp.StatusCode, ct)
	}
	out := make(chan event, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case out <- event{name, strings.TrimPrefix(line, "data: ")}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	d.t.Cleanup(func() { cancel(); _ = resp.Body.Close(); <-done })
	return out
}

// waitEvent reads evs until ok accepts an event, failing the test after timeout.
func waitEvent(t *testing.T, evs <-chan event, timeout time.Duration, what string, ok func(event) bool) event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, open := <-evs:
			if !open {
				t.Fatalf("%s: the event stream ended", what)
			}
			if ok(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("%s: no such event within %v", what, timeout)
		}
	}
}

// info is GET /system/info decoded.
func (d *dev) info() map[string]any {
	d.t.Helper()
	r := d.call("GET", "/api/v1/system/info", "")
	if r.status != 200 {
		d.t.Fatalf("info: %d %s", r.status, r.body)
	}
	return r.json(d.t)
}

// boardGet reads from the simulated board's control channel.
func (d *dev) boardGet(path string) []byte {
	d.t.Helper()
	return d.boardCtl("GET", path, "")
}

// boardCtl drives the simulated board's control channel and answers the board's state.
func (d *dev) boardCtl(method, path, body string) []byte {
	d.t.Helper()
	conn, err := net.Dial("unix", filepath.Join(d.data, "flash", "board.sock"))
	if err != nil {
		d.t.Fatalf("board control channel: %v", err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: board\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, path, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		d.t.Fatalf("board control %s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		d.t.Fatalf("board control %s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}
