package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports/all"
)

// optionOwners maps every option key a user can pass (transports/all's
// option sets) to the directory of the package that declares its set: the
// package whose composite literal transports.OptionSet{Name: ...} names it.
func optionOwners(t *testing.T, files []goFile) map[string]string {
	t.Helper()
	setDir := map[string]string{}
	for _, f := range files {
		if f.test || !strings.HasPrefix(f.pkg, "transports/") {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if sel, ok := lit.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "OptionSet" {
				return true
			}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if id, isID := kv.Key.(*ast.Ident); !ok || !isID || id.Name != "Name" {
					continue
				}
				if b, ok := kv.Value.(*ast.BasicLit); ok && b.Kind == token.STRING {
					name, _ := strconv.Unquote(b.Value)
					setDir[name] = f.pkg
				}
			}
			return true
		})
	}
	owners := map[string]string{}
	for _, s := range all.OptionSets() {
		dir, ok := setDir[s.Name]
		if !ok {
			t.Fatalf("option set %q: no package under transports/ declares it with a literal name", s.Name)
		}
		for _, o := range s.Options {
			owners[o.Key] = dir
		}
	}
	if len(owners) < 20 {
		t.Fatalf("only %d option keys registered: the registry is broken", len(owners))
	}
	return owners
}

// offendingKeys lists the string literals of f that spell an option key
// owned by another package than f's.
func offendingKeys(f goFile, fset *token.FileSet, owners map[string]string) []string {
	var out []string
	ast.Inspect(f.ast, func(n ast.Node) bool {
		b, ok := n.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(b.Value)
		if owner, isKey := owners[v]; err == nil && isKey && owner != f.pkg {
			out = append(out, fset.Position(b.Pos()).String()+": spells option key "+strconv.Quote(v)+" of "+owner+": use its exported constant, Params.Options or a helper of that package")
		}
		return true
	})
	return out
}

// An option key is spelt by the transport package that reads it and only
// there: others use its constants or typed parameters, so that renaming or
// retyping an option is one package's change. Tests count too, except the
// tests of transports, which configure the engines they build on.
func TestOptionKeysStayInTheirTransport(t *testing.T) {
	root, _ := moduleRoot(t)
	fset := token.NewFileSet()
	files := moduleFiles(t, root, fset)
	owners := optionOwners(t, files)
	for _, f := range files {
		if f.pkg == "internal/archtest" || f.test && (f.pkg == "transports" || strings.HasPrefix(f.pkg, "transports/")) {
			continue // the check's own examples; the transports' tests
		}
		for _, v := range offendingKeys(f, fset, owners) {
			t.Error(v)
		}
	}
}

// The check finds a key spelt outside its package and allows it inside.
func TestOffendingKeys(t *testing.T) {
	owners := map[string]string{"sm.eager": "transports/sm"}
	for _, c := range []struct {
		pkg, src string
		want     int
	}{
		{"tuner/sweep", `package p; var o = map[string]string{"sm.eager": "8K"}`, 1},
		{"transports/sm", `package p; const KeyEager = "sm.eager"`, 0},
		{"tuner/sweep", `package p; var s = "sm.eager=8K"; var h = "sm.dpeth"`, 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", c.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := offendingKeys(goFile{pkg: c.pkg, ast: f}, fset, owners); len(got) != c.want {
			t.Errorf("%s: %s: %q, want %d findings", c.pkg, c.src, got, c.want)
		}
	}
}
