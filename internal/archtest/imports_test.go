package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// layerRule says what a package (a directory relative to the module root)
// must not import from the module; nil means anything goes.
func layerRule(pkg, imp string) error {
	under := func(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
	top := func(p string) string { t, _, _ := strings.Cut(p, "/"); return t }
	if pkg == imp {
		return nil // an external test package
	}
	if pkg == "internal/archtest" {
		return nil // the rules' own tests read the registries they check against
	}
	switch {
	case under(imp, "cmd"):
		return fmt.Errorf("nothing imports the command")
	case under(pkg, "internal"):
		if !under(imp, "internal") {
			return fmt.Errorf("internal packages import no top-level package")
		}
	case under(pkg, "transports"):
		if t := top(imp); t == "bench" || t == "tuner" {
			return fmt.Errorf("transports never import %s", t)
		}
	case under(pkg, "profile"):
		if !under(imp, "internal") && !under(imp, "profile") {
			return fmt.Errorf("the profile is a data format below the transports: it and its renderers import internal packages and the profile only")
		}
	case under(pkg, "bench"):
		if under(imp, "tuner") || under(imp, "htmlreport") {
			return fmt.Errorf("bench never imports the tuner or the report")
		}
	case under(pkg, "tuner"):
		if under(imp, "htmlreport") {
			return fmt.Errorf("the tuner never imports the report that draws its runs")
		}
	case under(pkg, "scripts"):
		if !under(imp, "internal") {
			return fmt.Errorf("scripts beside the product import internal packages only")
		}
	}
	return nil
}

// floors are the module's top-level directories holding Go code, from the
// bottom up; layerRule has a rule for each (htmlreport and cmd sit on top,
// and only cmd's import is forbidden to all).
var floors = []string{"internal", "profile", "transports", "bench", "tuner", "htmlreport", "cmd", "scripts"}

// rawSyscall reports whether a file outside internal/sys makes a raw
// system call: importing golang.org/x/sys/unix, or calling a function of
// package syscall (its types and constants, such as syscall.SIGTERM or
// syscall.SysProcAttr, are fine).
func rawSyscall(f *ast.File, fset *token.FileSet) []string {
	var out []string
	syscallName := ""
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		switch path {
		case "golang.org/x/sys/unix":
			out = append(out, fmt.Sprintf("%s: imports golang.org/x/sys/unix", fset.Position(im.Pos())))
		case "syscall":
			syscallName = "syscall"
			if im.Name != nil {
				syscallName = im.Name.Name
			}
		}
	}
	if syscallName == "" {
		return out
	}
	conversions := []string{"Signal", "WaitStatus", "Errno", "SysProcAttr"}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == syscallName && !slices.Contains(conversions, sel.Sel.Name) {
			out = append(out, fmt.Sprintf("%s: calls syscall.%s", fset.Position(call.Pos()), sel.Sel.Name))
		}
		return true
	})
	return out
}

// goFile is one parsed file of the module.
type goFile struct {
	pkg  string // directory relative to the module root
	test bool
	ast  *ast.File
}

// moduleFiles parses every Go file of the module under root (the results
// folder, testdata/ and hidden directories aside).
func moduleFiles(t *testing.T, root string, fset *token.FileSet) []goFile {
	t.Helper()
	var files []goFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "results" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		files = append(files, goFile{pkg: filepath.ToSlash(rel), test: strings.HasSuffix(name, "_test.go"), ast: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files under %s", root)
	}
	return files
}

// moduleRoot finds go.mod above the test's directory and the module path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir = testutil.ModuleRoot(t)
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(line, "module "); ok {
			return dir, strings.TrimSpace(m)
		}
	}
	t.Fatalf("%s/go.mod: no module line", dir)
	return "", ""
}

// Every import inside the module points down, in tests too.
func TestImportsPointDown(t *testing.T) {
	root, module := moduleRoot(t)
	fset := token.NewFileSet()
	n := 0
	for _, f := range moduleFiles(t, root, fset) {
		for _, im := range f.ast.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			imp, ok := strings.CutPrefix(path, module+"/")
			if !ok {
				continue
			}
			n++
			if err := layerRule(f.pkg, imp); err != nil {
				t.Errorf("%s: %s imports %s: %v", fset.Position(im.Pos()), f.pkg, imp, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no import of the module's own packages found: the walk is broken")
	}
}

// Every top-level package belongs to a floor: a new one must be given its
// place (and a rule) here before it can import anything.
func TestEveryTopLevelPackageHasAFloor(t *testing.T) {
	root, _ := moduleRoot(t)
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, f := range moduleFiles(t, root, fset) {
		top, _, _ := strings.Cut(f.pkg, "/")
		if f.pkg == "." || seen[top] {
			continue
		}
		seen[top] = true
		if !slices.Contains(floors, top) {
			t.Errorf("top-level package %s has no floor in archtest's floors %v", top, floors)
		}
	}
	if len(seen) < 5 {
		t.Fatalf("only %d top-level packages found: the walk is broken", len(seen))
	}
}

// Raw system calls are made in internal/sys only (production code; tests
// may provoke the kernel directly).
func TestRawSyscallsOnlyInSys(t *testing.T) {
	root, _ := moduleRoot(t)
	fset := token.NewFileSet()
	for _, f := range moduleFiles(t, root, fset) {
		if f.test || f.pkg == "internal/sys" || strings.HasPrefix(f.pkg, "internal/sys/") {
			continue
		}
		for _, v := range rawSyscall(f.ast, fset) {
			t.Error(v)
		}
	}
}

// The rules reject the upward imports they exist for, and allow the
// downward ones.
func TestLayerRule(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"transports/auto", "bench", false},
		{"transports/sm", "tuner/probe", false},
		{"transports", "cmd/gotune", false},
		{"internal/launch", "transports", false},
		{"internal/hostinfo", "bench", false},
		{"bench/mpistack", "tuner/search", false},
		{"bench", "htmlreport", false},
		{"tuner/sweep", "htmlreport", false},
		{"scripts/nshosts", "bench", false},
		{"scripts/nshosts", "internal/sys", true},
		{"htmlreport", "tuner/sweep", true},
		{"bench", "tuner/store", false},
		{"profile", "bench", false},
		{"profile", "transports/sm", false},
		{"tuner/sweep", "cmd/gotune", false},
		{"internal/cuda", "bench/gpuload", false},
		{"transports/auto", "profile", true},
		{"transports/auto", "internal/hostinfo", true},
		{"profile", "transports", false},
		{"profile", "internal/bytesize", true},
		{"profile/native", "profile", true},
		{"profile/native", "transports", false},
		{"profile/native", "tuner/stack", false},
		{"bench", "transports/sm", true},
		{"bench/output", "bench", true},
		{"tuner/sweep", "bench", true},
		{"tuner/sweep", "profile", true},
		{"cmd/gotune", "tuner/sweep", true},
		{"internal/cuda", "internal/sys", true},
		{"internal/cuda/cudatest", "internal/cuda", true},
		{"internal/cuda", "internal/cuda/cudatest", true},
		{"internal/archtest", "transports/all", true},
	} {
		err := layerRule(c.pkg, c.imp)
		if (err == nil) != c.ok {
			t.Errorf("%s -> %s: %v, want allowed=%v", c.pkg, c.imp, err, c.ok)
		}
	}
}

func TestRawSyscallDetection(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
	}{
		{`package p; import "golang.org/x/sys/unix"; func f() int { return unix.Gettid() }`, 1},
		{`package p; import "syscall"; func f() { syscall.Kill(1, syscall.SIGQUIT) }`, 1},
		{`package p; import sc "syscall"; func f() { sc.Kill(1, 0) }`, 1},
		{`package p; import "syscall"; var a = &syscall.SysProcAttr{Setpgid: true}; var s = syscall.Signal(3); var t = syscall.SIGTERM`, 0},
		{`package p; import "os"; func f() { os.Getpid() }`, 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", c.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := rawSyscall(f, fset); len(got) != c.want {
			t.Errorf("%s: %q, want %d findings", c.src, got, c.want)
		}
	}
}

// testHelper reports whether a package exists only for tests: the rank
// harnesses and fixtures (transporttest, launchtest, cudatest) and
// internal/testutil.
func testHelper(pkg string) bool {
	return strings.HasSuffix(path.Base(pkg), "test") || pkg == "internal/testutil" || strings.HasPrefix(pkg, "internal/testutil/")
}

// Test helpers are imported by tests, other test helpers and the scripts
// that drive the test harnesses (scripts/nshosts) only: product code that
// imports one would carry test fixtures into the binary.
func TestTestHelpersOnlyInTests(t *testing.T) {
	root, module := moduleRoot(t)
	fset := token.NewFileSet()
	helpers := 0
	for _, f := range moduleFiles(t, root, fset) {
		for _, im := range f.ast.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			imp, ok := strings.CutPrefix(p, module+"/")
			if !ok || !testHelper(imp) {
				continue
			}
			helpers++
			if !f.test && !testHelper(f.pkg) && !strings.HasPrefix(f.pkg, "scripts/") {
				t.Errorf("%s: %s imports the test helper %s outside a test", fset.Position(im.Pos()), f.pkg, imp)
			}
		}
	}
	if helpers == 0 {
		t.Fatal("no import of a test helper found: the walk is broken")
	}
}
