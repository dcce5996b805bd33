package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// source is one Go file the generator reads.
type source struct {
	name string // as headers and errors show it: protocol/commands.go
	src  []byte
}

// protocol is what the generator learned from the Go files: the types and
// constants of the type files, the method descriptors among their vars, and
// the error codes of the codes file.
type protocol struct {
	fset  *token.FileSet
	files []*ast.File // the type files, in the order given
	names []string    // every source's name, type files first, for headers

	types     map[string]*typeInfo // exported, non-generic types of the type files
	typeOrder []string             // their names in declaration order
	enums     map[string][]string  // named type → its constants' values, as TS literals
	// marshalers are the types with their own MarshalJSON: their Go shape
	// says nothing of their JSON.
	marshalers map[string]bool
	strConsts  map[string]string // string constants' values, to resolve a descriptor's method

	groups []descGroup // the var blocks that declare descriptors, in order
	descs  []*descriptor

	codesDoc *ast.CommentGroup // the doc of the codes' const block
	codes    []errorCode
}

// typeInfo is one exported type declaration.
type typeInfo struct {
	name string
	spec *ast.TypeSpec
	doc  *ast.CommentGroup
}

// descGroup is a var block of descriptors; its doc's first sentence titles
// its section of the reference.
type descGroup struct {
	decl  *ast.GenDecl
	doc   *ast.CommentGroup
	descs []*descriptor
}

// descriptor is one `X = RequestType[P, R](method)` or
// `X = NotificationType[P](method)` of the type files.
type descriptor struct {
	name    string // the Go variable: RunCommandRequest
	request bool
	method  string // the wire name: runCommand
	params  string // the Go type of the params
	result  string // the Go type of the result; "" for a notification
	doc     *ast.CommentGroup
}

// errorCode is one integer constant of the codes file named Code….
type errorCode struct {
	name  string // CodeSpawnFailed
	value int
	doc   *ast.CommentGroup
}

// load parses the type files and the codes file.
func load(typeFiles []source, codes *source) (*protocol, error) {
	p := &protocol{
		fset:       token.NewFileSet(),
		types:      map[string]*typeInfo{},
		enums:      map[string][]string{},
		marshalers: map[string]bool{},
		strConsts:  map[string]string{},
	}
	for _, s := range typeFiles {
		f, err := parser.ParseFile(p.fset, s.name, s.src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		p.names = append(p.names, s.name)
	}
	for _, f := range p.files {
		p.collect(f)
	}
	for _, f := range p.files {
		if err := p.collectDescriptors(f); err != nil {
			return nil, err
		}
	}
	if codes != nil {
		f, err := parser.ParseFile(p.fset, codes.name, codes.src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(p.names, codes.name) {
			p.names = append(p.names, codes.name)
		}
		if err := p.collectCodes(f); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// collect finds the declared types, the typed constants (so that a type can
// be emitted as the union of its constants wherever it is declared), the
// string constants and the marshalers.
func (p *protocol) collect(file *ast.File) {
	for _, decl := range file.Decls {
		if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.Name == "MarshalJSON" {
			recv := fd.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				p.marshalers[id.Name] = true
			}
		}
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		switch gd.Tok {
		case token.TYPE:
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() || ts.TypeParams != nil {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				p.types[ts.Name.Name] = &typeInfo{name: ts.Name.Name, spec: ts, doc: doc}
				p.typeOrder = append(p.typeOrder, ts.Name.Name)
			}
		case token.CONST:
			for _, c := range constants(gd) {
				if c.typ != "" {
					p.enums[c.typ] = append(p.enums[c.typ], c.lit)
				}
				if s, err := strconv.Unquote(c.lit); err == nil {
					p.strConsts[c.name] = s
				}
			}
		}
	}
}

// collectDescriptors finds the descriptors among the vars of a type file.
// A var block holds descriptors only, or none.
func (p *protocol) collectDescriptors(file *ast.File) error {
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		var g descGroup
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				d, ok, err := p.descriptor(n.Name, vs.Values[i])
				if err != nil {
					return fmt.Errorf("%s: %w", p.fset.Position(n.Pos()), err)
				}
				if !ok {
					continue
				}
				d.doc = vs.Doc
				if d.doc == nil {
					d.doc = vs.Comment
				}
				g.descs = append(g.descs, d)
			}
		}
		if len(g.descs) == 0 {
			continue
		}
		if len(g.descs) != len(gd.Specs) {
			return fmt.Errorf("%s: a var block declares descriptors and other vars", p.fset.Position(gd.Pos()))
		}
		g.decl, g.doc = gd, gd.Doc
		if len(gd.Specs) == 1 && gd.Lparen == token.NoPos {
			g.descs[0].doc = gd.Doc
		}
		p.groups = append(p.groups, g)
		p.descs = append(p.descs, g.descs...)
	}
	return nil
}

// descriptor recognises `RequestType[P, R](method)` and
// `NotificationType[P](method)`, where method is a string constant or
// literal and P and R are types of the type files.
func (p *protocol) descriptor(name string, e ast.Expr) (*descriptor, bool, error) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil, false, nil
	}
	var base ast.Expr
	var args []ast.Expr
	switch f := call.Fun.(type) {
	case *ast.IndexListExpr:
		base, args = f.X, f.Indices
	case *ast.IndexExpr:
		base, args = f.X, []ast.Expr{f.Index}
	default:
		return nil, false, nil
	}
	id, ok := base.(*ast.Ident)
	if !ok {
		return nil, false, nil
	}
	d := &descriptor{name: name}
	switch {
	case id.Name == "RequestType" && len(args) == 2:
		d.request = true
	case id.Name == "NotificationType" && len(args) == 1:
	default:
		return nil, false, nil
	}
	var typeNames []string
	for _, a := range args {
		tid, ok := a.(*ast.Ident)
		if !ok || p.types[tid.Name] == nil {
			return nil, false, fmt.Errorf("descriptor %s: type argument %s must be a type declared in the type files", name, exprString(a))
		}
		typeNames = append(typeNames, tid.Name)
	}
	d.params = typeNames[0]
	if d.request {
		d.result = typeNames[1]
	}
	switch m := call.Args[0].(type) {
	case *ast.Ident:
		v, ok := p.strConsts[m.Name]
		if !ok {
			return nil, false, fmt.Errorf("descriptor %s: %s is not a string constant of the type files", name, m.Name)
		}
		d.method = v
	case *ast.BasicLit:
		v, err := strconv.Unquote(m.Value)
		if err != nil || m.Kind != token.STRING {
			return nil, false, fmt.Errorf("descriptor %s: the method must be a string", name)
		}
		d.method = v
	default:
		return nil, false, fmt.Errorf("descriptor %s: the method must be a string constant or literal", name)
	}
	return d, true, nil
}

// collectCodes finds the integer constants named Code… of the codes file.
func (p *protocol) collectCodes(file *ast.File) error {
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		found := false
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			doc := vs.Doc
			if doc == nil {
				doc = vs.Comment
			}
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Code") || !n.IsExported() || i >= len(vs.Values) {
					continue
				}
				lit, ok := literal(vs.Values[i])
				v, err := strconv.Atoi(lit)
				if !ok || err != nil {
					return fmt.Errorf("%s: %s must be an integer literal", p.fset.Position(n.Pos()), n.Name)
				}
				p.codes = append(p.codes, errorCode{name: n.Name, value: v, doc: doc})
				found = true
			}
		}
		if found && p.codesDoc == nil {
			p.codesDoc = gd.Doc
		}
	}
	if len(p.codes) == 0 {
		return fmt.Errorf("%s: no Code… constants", p.fset.Position(file.Pos()).Filename)
	}
	return nil
}

// code returns the error code named name.
func (p *protocol) code(name string) (errorCode, bool) {
	for _, c := range p.codes {
		if c.name == name {
			return c, true
		}
	}
	return errorCode{}, false
}

// sourceList names the sources for a header: "a.go, b.go and c.go".
func (p *protocol) sourceList() string {
	n := p.names
	switch len(n) {
	case 0:
		return ""
	case 1:
		return n[0]
	}
	return strings.Join(n[:len(n)-1], ", ") + " and " + n[len(n)-1]
}

// isCodes reports whether a const block of a type file is the block of
// error codes: one that holds a code of the codes file. The codes are
// written once, with the codes, when the codes file is also a type file.
func (p *protocol) isCodes(gd *ast.GenDecl) bool {
	for _, spec := range gd.Specs {
		for _, name := range spec.(*ast.ValueSpec).Names {
			if slices.ContainsFunc(p.codes, func(c errorCode) bool { return c.name == name.Name }) {
				return true
			}
		}
	}
	return false
}

// dir is the directory of the sources, as go generate names its
// package: "protocol".
func (p *protocol) dir() string {
	if len(p.names) == 0 {
		return "."
	}
	return path.Dir(filepath.ToSlash(p.names[0]))
}

// exprString prints a type expression for messages.
func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.ArrayType:
		return "[]" + exprString(t.Elt)
	case *ast.MapType:
		return "map[" + exprString(t.Key) + "]" + exprString(t.Value)
	}
	return fmt.Sprintf("%T", e)
}
