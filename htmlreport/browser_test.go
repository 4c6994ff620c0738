package htmlreport

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gotune/gotune/internal/testutil"
)

// pageCheck is what a browser found on a report page.
type pageCheck struct {
	Plots    []string // the data-plot of every figure, in page order
	Problems []string // script or console errors, requests, missing or empty plots
	PNG      []byte   // a screenshot of the whole page
}

// plotsJS lists the page's figures and what is wrong with each: no SVG,
// an SVG that lays out empty, or one with nothing drawn in it; and whether
// the plots' font is the embedded one.
const plotsJS = `(() => {
  const problems = [], plots = [];
  for (const f of document.querySelectorAll('figure.plot')) {
    const id = f.dataset.plot || '(no id)';
    plots.push(id);
    const s = f.querySelector('svg');
    if (!s) { problems.push(id + ': no plot in its figure'); continue; }
    const r = s.getBoundingClientRect();
    if (r.width < 200 || r.height < 100) problems.push(id + ': plot lays out ' + r.width + 'x' + r.height);
    if (s.querySelectorAll('path').length < 10) problems.push(id + ': ' + s.querySelectorAll('path').length + ' paths drawn');
    if (s.querySelectorAll('text').length < 3) problems.push(id + ': no text');
  }
  if (!document.fonts.check('12px "Liberation Sans"')) problems.push('the embedded font is not available');
  return {plots, problems};
})()`

// inspect loads the file at path in headless Chromium with the network
// off (any request other than the file itself and data: URLs is a
// problem), and reports its plots and problems.
func inspect(t *testing.T, chrome, path string) pageCheck {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900),
		// No way out: a request that escapes the emulated offline state
		// goes to a proxy that is not there.
		chromedp.ProxyServer("127.0.0.1:9"), chromedp.Flag("proxy-bypass-list", "<-loopback>"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	var mu sync.Mutex
	var res pageCheck
	problem := func(format string, args ...any) {
		mu.Lock()
		res.Problems = append(res.Problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			problem("script error: %s", e.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problem("console %s", e.Type)
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				problem("console %s: %s", e.Entry.Level, e.Entry.Text)
			}
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
				problem("the page requested %s", u)
			}
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	steps := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, step := range []func() error{
			func() error { _, err := cdp.Call(ctx, tg, runtime.Enable, cdp.Empty{}); return err },
			func() error { _, err := cdp.Call(ctx, tg, log.Enable, cdp.Empty{}); return err },
			func() error { _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); return err },
			func() error {
				_, err := cdp.Call(ctx, tg, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
					MatchedNetworkConditions: []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}}})
				return err
			},
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err := chromedp.Do(ctx, steps, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("load %s in chromium: %v", path, err)
	}
	found, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Plots    []string `json:"plots"`
		Problems []string `json:"problems"`
	}](plotsJS))
	if err != nil {
		t.Fatalf("check the plots of %s: %v", path, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", path, err)
	}
	mu.Lock()
	defer mu.Unlock()
	res.Plots, res.PNG = found.Plots, png
	res.Problems = append(res.Problems, found.Problems...)
	return res
}

// The report of a quick sweep and of a GPU sweep, as stored in the
// catalogue, opens offline in headless Chromium (Debian's chromium) with no
// script or console error and no request, every plot written beside it is
// on the page, drawn and not empty; a screenshot of each goes to the
// test's artifact directory (go test -artifacts keeps it). A page with a
// plot taken out fails the same check.
func TestReportInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chrome, err := exec.LookPath("chromium")
	testutil.SkipUnless(t, "chromium", err)
	root := testutil.ModuleRoot(t)
	for _, c := range reportRuns {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			path, err := Write(ctx, out, filepath.Join(root, c.dir))
			if err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(out, "*.svg"))
			var want []string
			for _, f := range files {
				want = append(want, strings.TrimSuffix(filepath.Base(f), ".svg"))
			}
			if len(want) < c.minPlots {
				t.Fatalf("%d plots written (%v), want at least %d", len(want), want, c.minPlots)
			}
			got := inspect(t, chrome, path)
			for _, p := range got.Problems {
				t.Errorf("%s: %s", c.name, p)
			}
			if g := slices.Sorted(slices.Values(got.Plots)); !slices.Equal(g, want) {
				t.Errorf("plots on the page %v, want the files written beside it %v", g, want)
			}
			shot := filepath.Join(t.ArtifactDir(), c.name+".png")
			if err := os.WriteFile(shot, got.PNG, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s (%d bytes)", shot, len(got.PNG))

			if c.name != reportRuns[0].name {
				return
			}
			// The check fails pages that are wrong in each way it looks for.
			page, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s := string(page)
			i, j := strings.Index(s, "<svg"), strings.Index(s, "</svg>")
			if i < 0 || j < i || len(got.Plots) == 0 {
				t.Fatal("no inline SVG in the report")
			}
			body := strings.Index(s, "<body>") + len("<body>")
			for _, m := range []struct {
				name, page, want string
			}{
				{"plot missing", s[:i] + s[j+len("</svg>"):], got.Plots[0] + ": no plot in its figure"},
				{"plot empty", s[:i] + `<svg width="1" height="1"></svg>` + s[j+len("</svg>"):], got.Plots[0] + ": 0 paths drawn"},
				{"script error", s[:body] + "<script>noSuchFunction()</script>" + s[body:], "script error"},
				{"console error", s[:body] + "<script>console.error('x')</script>" + s[body:], "console error"},
				{"fetches", s[:body] + `<img src="http://192.0.2.1/x.png">` + s[body:], "the page requested http://192.0.2.1/x.png"},
			} {
				bad := filepath.Join(out, "bad.html")
				if err := os.WriteFile(bad, []byte(m.page), 0o644); err != nil {
					t.Fatal(err)
				}
				res := inspect(t, chrome, bad)
				if !slices.ContainsFunc(res.Problems, func(p string) bool { return strings.HasPrefix(p, m.want) }) {
					t.Errorf("%s: the check passed it (problems %q), want one starting %q", m.name, res.Problems, m.want)
				}
			}
		})
	}
}

// reportRuns are the run directories of record the report tests draw.
var reportRuns = []struct {
	name, dir string
	minPlots  int
}{
	{"quick", "results/catalogue/vm", 10},
	{"gpu", "results/catalogue/gpu-h200x2", 10},
}
