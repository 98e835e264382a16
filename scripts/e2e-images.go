// e2e-images: the container images the [Conformance] specs of a Kubernetes source tree use, read from its
// sources (standard library only; run by scripts/build-e2e-images.sh as `go run scripts/e2e-images.go DIR`).
//
//	go run scripts/e2e-images.go [-why] K8S_DIR
//
// K8S_DIR is a k8s.io/kubernetes module (`go mod download -json k8s.io/kubernetes@vX.Y.Z` prints its Dir).
// Output, one line per image, sorted: "ID REFERENCE" (ID as in test/utils/image/manifest.go, REFERENCE
// from its default registries); with -why each line is followed by "#   spec -> function -> ..." (one path
// from a spec to the image). Lines starting with "#" are comments.
//
// How: every spec labelled Conformance (framework.ConformanceIt, or an It with framework.WithConformance())
// under test/e2e is a root. From its body and the setup of the containers around it (their closures minus
// the other specs and containers in them: BeforeEach, variables, helper closures), every function, method
// and package-level variable it names in test/e2e/... and test/utils/... is followed (methods by name, in
// the same package and the packages the file imports: an over-approximation, never type-checked), and
// every test/utils/image ImageID met on the way is an image the specs use (GetPauseImageName is Pause).
// Images handed to manifests through text/template structs (test/e2e/common/util.go's testImages, fields
// like AgnhostImage) count only when a manifest named by a string the specs reach (testing-manifests,
// test/fixtures) has {{.Field}}, or the Go code reads the field.
// test/conformance/testdata/conformance.yaml cross-checks the roots: the same number of specs and files.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const (
	module   = "k8s.io/kubernetes"
	imagePkg = module + "/test/utils/image"
)

type file struct {
	pkg     string
	ast     *ast.File
	imports map[string]string // local name -> import path
}

type decl struct {
	f    *file
	node ast.Node
}

type pkgInfo struct {
	funcs   map[string][]decl // package-level functions and variables/constants by name
	methods map[string][]decl
	inits   []decl
	structs map[string]*ast.StructType
}

var (
	pkgs      = map[string]*pkgInfo{}
	imageIDs  = map[string]bool{}
	fset      = token.NewFileSet()
	visited   = map[ast.Node]bool{}
	found     = map[string][]string{}            // ImageID -> path to it
	strs      = map[string][]string{}            // string literals reached -> path
	tmplField = map[string]map[string][]string{} // template struct field -> ImageID -> path
	fieldRead = map[string][]string{}            // selector names reached -> path
	specCalls = map[string]bool{"It": true, "ConformanceIt": true, "FIt": true, "PIt": true, "XIt": true,
		"Describe": true, "FDescribe": true, "PDescribe": true, "Context": true, "FContext": true, "PContext": true,
		"When": true, "DescribeTable": true, "Entry": true, "SIGDescribe": true}
)

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "e2e-images: "+format+"\n", a...)
	os.Exit(1)
}

func calleeName(call *ast.CallExpr) string {
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name
	case *ast.SelectorExpr:
		return fn.Sel.Name
	}
	return ""
}

func load(root string) {
	for _, top := range []string{"test/e2e", "test/utils"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "vendor" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			af, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			pkg := module + "/" + filepath.ToSlash(rel)
			f := &file{pkg: pkg, ast: af, imports: map[string]string{}}
			for _, imp := range af.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				name := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					name = imp.Name.Name
				}
				f.imports[name] = p
			}
			pi := pkgs[pkg]
			if pi == nil {
				pi = &pkgInfo{funcs: map[string][]decl{}, methods: map[string][]decl{}, structs: map[string]*ast.StructType{}}
				pkgs[pkg] = pi
			}
			for _, d := range af.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					switch {
					case d.Recv != nil:
						pi.methods[d.Name.Name] = append(pi.methods[d.Name.Name], decl{f, d})
					case d.Name.Name == "init":
						pi.inits = append(pi.inits, decl{f, d})
					default:
						pi.funcs[d.Name.Name] = append(pi.funcs[d.Name.Name], decl{f, d})
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.ValueSpec:
							for _, n := range s.Names {
								pi.funcs[n.Name] = append(pi.funcs[n.Name], decl{f, s})
							}
						case *ast.TypeSpec:
							if st, ok := s.Type.(*ast.StructType); ok {
								pi.structs[s.Name.Name] = st
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			die("%v", err)
		}
	}
	img := pkgs[imagePkg]
	if img == nil {
		die("no %s in %s", imagePkg, root)
	}
	// the ImageIDs: the constants of type ImageID (the iota block)
	for _, ds := range img.funcs {
		for _, d := range ds {
			vs, ok := d.node.(*ast.ValueSpec)
			if !ok {
				continue
			}
			gd := findGenDecl(d.f.ast, vs)
			if gd == nil || gd.Tok != token.CONST {
				continue
			}
			for i, s := range gd.Specs {
				if t, ok := s.(*ast.ValueSpec).Type.(*ast.Ident); ok && t.Name == "ImageID" && i == 0 {
					for _, s := range gd.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							imageIDs[n.Name] = true
						}
					}
				}
			}
		}
	}
	if len(imageIDs) == 0 {
		die("no ImageID constants in %s", imagePkg)
	}
}

func findGenDecl(f *ast.File, vs *ast.ValueSpec) *ast.GenDecl {
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok {
			for _, s := range gd.Specs {
				if s == vs {
					return gd
				}
			}
		}
	}
	return nil
}

func record(m map[string][]string, key string, path []string) {
	if _, ok := m[key]; !ok {
		m[key] = append([]string(nil), path...)
	}
}

func declName(d decl) string {
	switch n := d.node.(type) {
	case *ast.FuncDecl:
		name := n.Name.Name
		if n.Recv != nil && len(n.Recv.List) > 0 {
			t := n.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		return strings.TrimPrefix(d.f.pkg, module+"/") + "." + name
	case *ast.ValueSpec:
		return strings.TrimPrefix(d.f.pkg, module+"/") + "." + n.Names[0].Name
	}
	return strings.TrimPrefix(d.f.pkg, module+"/") + ".init"
}

// follow walks what a declaration reaches, once.
func follow(d decl, path []string) {
	if visited[d.node] {
		return
	}
	visited[d.node] = true
	path = append(path[:len(path):len(path)], declName(d))
	switch n := d.node.(type) {
	case *ast.FuncDecl:
		if n.Body != nil {
			walk(d.f, n.Body, path)
		}
	case *ast.ValueSpec:
		for _, v := range n.Values {
			walk(d.f, v, path)
		}
		// a variable set in init(): the init functions of its package that name it
		for _, in := range pkgs[d.f.pkg].inits {
			mentions := false
			ast.Inspect(in.node, func(x ast.Node) bool {
				if id, ok := x.(*ast.Ident); ok && id.Name == n.Names[0].Name {
					mentions = true
				}
				return !mentions
			})
			if mentions {
				follow(in, path)
			}
		}
	}
}

func isTopLevel(f *file, id *ast.Ident) bool {
	if id.Obj == nil {
		return true
	}
	for _, d := range f.ast.Decls {
		if id.Obj.Decl == d {
			return true
		}
		if gd, ok := d.(*ast.GenDecl); ok {
			for _, s := range gd.Specs {
				if id.Obj.Decl == s {
					return true
				}
			}
		}
	}
	return false
}

// walk records the images in node and follows what it names. Spec and container calls (It, Describe, ...)
// in it are skipped: specs are roots of their own.
func walk(f *file, node ast.Node, path []string) {
	ast.Inspect(node, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.CallExpr:
			if specCalls[calleeName(x)] {
				return false
			}
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				if s, err := strconv.Unquote(x.Value); err == nil {
					record(strs, s, path)
				}
			}
		case *ast.CompositeLit:
			if id, ok := x.Type.(*ast.Ident); ok {
				if st := pkgs[f.pkg].structs[id.Name]; st != nil && templateStruct(f, st, x, path) {
					return false
				}
			}
		case *ast.SelectorExpr:
			if pkgID, ok := x.X.(*ast.Ident); ok && pkgID.Obj == nil {
				if p, ok := f.imports[pkgID.Name]; ok {
					name := x.Sel.Name
					if p == imagePkg {
						if name == "GetPauseImageName" {
							name = "Pause"
						}
						if imageIDs[name] {
							record(found, name, path)
						}
					} else if pi := pkgs[p]; pi != nil {
						for _, d := range pi.funcs[name] {
							follow(d, path)
						}
					}
					return false
				}
			}
			record(fieldRead, x.Sel.Name, path)
			for _, p := range append([]string{f.pkg}, values(f.imports)...) {
				if pi := pkgs[p]; pi != nil {
					for _, d := range pi.methods[x.Sel.Name] {
						follow(d, path)
					}
				}
			}
			walk(f, x.X, path)
			return false
		case *ast.Ident:
			if isTopLevel(f, x) {
				for _, d := range pkgs[f.pkg].funcs[x.Name] {
					follow(d, path)
				}
			}
		}
		return true
	})
}

func values(m map[string]string) []string {
	var v []string
	for _, p := range m {
		v = append(v, p)
	}
	sort.Strings(v)
	return v
}

// templateStruct: a literal of a struct whose fields are named *Image (template data for manifests). Its
// images are kept per field, not recorded; true when it was one.
func templateStruct(f *file, st *ast.StructType, lit *ast.CompositeLit, path []string) bool {
	var fields []string
	for _, fl := range st.Fields.List {
		for _, n := range fl.Names {
			fields = append(fields, n.Name)
		}
	}
	if len(fields) == 0 {
		return false
	}
	for _, n := range fields {
		if !strings.HasSuffix(n, "Image") {
			return false
		}
	}
	for i, el := range lit.Elts {
		name := ""
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok {
				name = k.Name
			}
			el = kv.Value
		} else if i < len(fields) {
			name = fields[i]
		}
		// the images of this field: walk it alone into a scratch record
		saved := found
		found = map[string][]string{}
		walk(f, el, append(path[:len(path):len(path)], "{{."+name+"}}"))
		if tmplField[name] == nil {
			tmplField[name] = map[string][]string{}
		}
		for id, p := range found {
			record(tmplField[name], id, p)
		}
		found = saved
	}
	return true
}

// roots: the Conformance specs of one file, each with the closures around it.
func roots(f *file, visit func(spec *ast.CallExpr, stack []ast.Node)) {
	var stack []ast.Node
	ast.Inspect(f.ast, func(x ast.Node) bool {
		if x == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		if call, ok := x.(*ast.CallExpr); ok && isConformance(call) {
			visit(call, append([]ast.Node(nil), stack...))
		}
		stack = append(stack, x)
		return true
	})
}

func isConformance(call *ast.CallExpr) bool {
	switch calleeName(call) {
	case "ConformanceIt":
		return true
	case "It":
		for _, a := range call.Args {
			if c, ok := a.(*ast.CallExpr); ok && calleeName(c) == "WithConformance" {
				return true
			}
		}
	}
	return false
}

func main() {
	why := flag.Bool("why", false, "print one path from a spec to each image")
	flag.Parse()
	if flag.NArg() != 1 {
		die("usage: e2e-images [-why] K8S_DIR")
	}
	root := flag.Arg(0)
	load(root)

	specs, specFiles := 0, map[string]bool{}
	var files []*file
	for _, pi := range pkgs {
		seen := map[*file]bool{}
		for _, ds := range [][]decl{flatten(pi.funcs), flatten(pi.methods), pi.inits} {
			for _, d := range ds {
				if !seen[d.f] {
					seen[d.f] = true
					files = append(files, d.f)
				}
			}
		}
	}
	sort.Slice(files, func(i, j int) bool {
		return fset.File(files[i].ast.Pos()).Name() < fset.File(files[j].ast.Pos()).Name()
	})
	for _, f := range files {
		name := fset.File(f.ast.Pos()).Name()
		rel, _ := filepath.Rel(root, name)
		roots(f, func(spec *ast.CallExpr, stack []ast.Node) {
			specs++
			specFiles[filepath.ToSlash(rel)] = true
			pos := fset.Position(spec.Pos())
			path := []string{fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line)}
			for _, a := range spec.Args {
				walk(f, a, path)
			}
			for _, n := range stack {
				switch n := n.(type) {
				case *ast.FuncLit:
					walk(f, n.Body, path)
				case *ast.FuncDecl:
					walk(f, n.Body, path)
				}
			}
		})
	}
	checkConformanceYAML(root, specs, specFiles)

	// template fields: used when a reached manifest has {{.Field}}, or the code reads the field
	var manifests []string
	for _, dir := range []string{"test/e2e/testing-manifests", "test/fixtures"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				manifests = append(manifests, p)
			}
			return nil
		})
	}
	sort.Strings(manifests)
	for field, ids := range tmplField {
		via := fieldRead[field]
		if via == nil {
			for _, m := range manifests {
				p := strs[filepath.Base(m)]
				if p == nil {
					continue
				}
				data, err := os.ReadFile(m)
				if err != nil {
					die("%v", err)
				}
				if regexp.MustCompile(`\{\{\s*\.` + field + `\s*\}\}`).Match(data) {
					rel, _ := filepath.Rel(root, m)
					via = append(p[:len(p):len(p)], filepath.ToSlash(rel))
					break
				}
			}
		}
		if via != nil {
			for id := range ids {
				record(found, id, append(via[:len(via):len(via)], "{{."+field+"}}"))
			}
		}
	}

	refs := references(root)
	var ids []string
	for id := range found {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return refs[ids[i]] < refs[ids[j]] || refs[ids[i]] == refs[ids[j]] && ids[i] < ids[j]
	})
	fmt.Printf("# %d Conformance specs in %d files\n", specs, len(specFiles))
	for _, id := range ids {
		ref := refs[id]
		if ref == "" {
			die("ImageID %s has no entry in manifest.go's initImageConfigs", id)
		}
		fmt.Printf("%s %s\n", id, ref)
		if *why {
			fmt.Printf("#   %s\n", strings.Join(found[id], " -> "))
		}
	}
}

func flatten(m map[string][]decl) []decl {
	var all []decl
	for _, ds := range m {
		all = append(all, ds...)
	}
	return all
}

// references: ImageID -> registry/name:version, from manifest.go's initRegistry and initImageConfigs.
func references(root string) map[string]string {
	data, err := os.ReadFile(filepath.Join(root, "test/utils/image/manifest.go"))
	if err != nil {
		die("%v", err)
	}
	src := string(data)
	regs := map[string]string{}
	block := regexp.MustCompile(`(?s)initRegistry = RegistryList\{(.*?)\n\t\}`).FindStringSubmatch(src)
	if block == nil {
		die("no initRegistry in manifest.go")
	}
	for _, m := range regexp.MustCompile(`(\w+):\s+"([^"]*)"`).FindAllStringSubmatch(block[1], -1) {
		regs[m[1]] = m[2]
	}
	refs := map[string]string{}
	for _, m := range regexp.MustCompile(`configs\[(\w+)\] = Config\{list\.(\w+), "([^"]+)", "([^"]+)"\}`).FindAllStringSubmatch(src, -1) {
		reg, ok := regs[m[2]]
		if !ok {
			die("manifest.go: registry %s of %s is not in initRegistry", m[2], m[1])
		}
		refs[m[1]] = reg + "/" + m[3] + ":" + m[4]
	}
	return refs
}

// checkConformanceYAML: the specs found are those test/conformance/testdata/conformance.yaml lists.
func checkConformanceYAML(root string, specs int, files map[string]bool) {
	data, err := os.ReadFile(filepath.Join(root, "test/conformance/testdata/conformance.yaml"))
	if err != nil {
		die("%v", err)
	}
	n, yfiles := 0, map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "- testname:") {
			n++
		}
		if f, ok := strings.CutPrefix(l, "  file: "); ok {
			yfiles[strings.TrimSpace(f)] = true
		}
	}
	var diff []string
	for f := range yfiles {
		if !files[f] {
			diff = append(diff, "only in conformance.yaml: "+f)
		}
	}
	for f := range files {
		if !yfiles[f] {
			diff = append(diff, "not in conformance.yaml: "+f)
		}
	}
	sort.Strings(diff)
	if n != specs || len(diff) > 0 {
		die("found %d Conformance specs, conformance.yaml lists %d; %s", specs, n, strings.Join(diff, "; "))
	}
}
