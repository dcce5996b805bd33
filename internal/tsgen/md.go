package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The markers around the generated part of PROTOCOL.md. The generator owns
// both lines and everything between them.
const (
	beginMarker = "<!-- BEGIN GENERATED"
	endMarker   = "<!-- END GENERATED -->"
)

// errNoMarkers says a document has no generated part to replace.
var errNoMarkers = errors.New("no generated part: want a line starting " + beginMarker + " and a later line " + endMarker)

// splice returns doc with its generated part, markers included, replaced by
// region.
func splice(doc, region []byte) ([]byte, error) {
	start, end, err := generatedPart(doc)
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, doc[:start]...)
	out = append(out, region...)
	return append(out, doc[end:]...), nil
}

// generatedPart returns the byte range of doc's generated part: from the
// start of the begin marker's line to the end of the end marker's line,
// its newline included.
func generatedPart(doc []byte) (start, end int, err error) {
	start, end = -1, -1
	for off := 0; off < len(doc); {
		line := doc[off:]
		next := len(doc)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		line = bytes.TrimRight(line, "\r")
		switch {
		case bytes.HasPrefix(line, []byte(beginMarker)):
			if start >= 0 {
				return 0, 0, fmt.Errorf("two lines start %s", beginMarker)
			}
			start = off
		case string(line) == endMarker:
			if start < 0 || end >= 0 {
				return 0, 0, errNoMarkers
			}
			end = next
		}
		off = next
	}
	if start < 0 || end < 0 {
		return 0, 0, errNoMarkers
	}
	return start, end, nil
}

// markdown returns the generated part of PROTOCOL.md, its markers included:
// a section per descriptor (params, result, the errors its doc lists), the
// types no single method owns, and the error codes.
func (p *protocol) markdown() ([]byte, error) {
	m := &md{p: p, errorsOf: map[*descriptor][]errorRow{}}
	m.place()
	if err := m.checkAnchors(); err != nil {
		return nil, err
	}
	for _, d := range p.descs {
		rows, err := m.errorRows(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		m.errorsOf[d] = rows
	}

	m.printf("%s by internal/tsgen from %s; DO NOT EDIT: change those and run go generate ./%s -->\n\n", beginMarker, p.sourceList(), p.dir())
	m.printf("# REFERENCE\n\n")
	m.printf("Every method, notification and type of the protocol, generated from %s, the same declarations the extension's `protocol.ts` and the Go code are made of. ", p.sourceList())
	m.printf("In the tables, *required* says that a member must be given (params) or is always present (results); a type `T | null` is present and may be `null`.\n\n")
	var toc []string
	for _, g := range p.groups {
		t := groupTitle(g)
		toc = append(toc, fmt.Sprintf("[%s](#%s)", t, slug(t)))
	}
	toc = append(toc, "[Types](#types)", "[Error codes](#error-codes)")
	m.printf("Contents: %s\n", strings.Join(toc, " · "))

	for _, g := range p.groups {
		m.printf("\n## %s\n", groupTitle(g))
		if rest := afterFirstSentence(g.doc.Text()); rest != "" {
			m.printf("\n%s\n", m.text(m.parse(rest), nil, ""))
		}
		for _, d := range g.descs {
			if err := m.descriptor(d); err != nil {
				return nil, fmt.Errorf("%s: %w", d.name, err)
			}
		}
	}

	m.printf("\n## Types\n\nThe types that more than one method uses, or none directly.\n")
	for _, name := range p.typeOrder {
		if !m.isStruct(name) || m.owner[name] != nil {
			continue
		}
		if err := m.typeSection(name, "###", true); err != nil {
			return nil, err
		}
	}

	m.codeTable()
	m.printf("\n%s\n", endMarker)
	return m.buf.Bytes(), nil
}

// md writes the Markdown reference.
type md struct {
	p   *protocol
	buf bytes.Buffer
	// owner is the descriptor whose section shows a struct type: the one
	// that takes it as params or result, else the only one that reaches it.
	// Types without an owner go to the Types section.
	owner map[string]*descriptor
	// placed lists, per descriptor, the types its section shows, in order.
	placed map[*descriptor][]string
	// users lists, per type, who refers to it: descriptors and types.
	users    map[string][]string
	errorsOf map[*descriptor][]errorRow
}

// errorRow is one item of the errors list of a descriptor's doc.
type errorRow struct {
	code errorCode
	when string
}

func (m *md) printf(format string, args ...any) { fmt.Fprintf(&m.buf, format, args...) }

// isStruct reports whether a type is shown as a table of fields: a struct
// whose JSON is its Go shape.
func (m *md) isStruct(name string) bool {
	ti := m.p.types[name]
	if ti == nil || m.p.marshalers[name] {
		return false
	}
	if _, ok := directive(ti.doc); ok {
		return false
	}
	_, ok := ti.spec.Type.(*ast.StructType)
	return ok && ti.spec.Assign == 0
}

// place decides where each struct type is shown.
func (m *md) place() {
	m.owner = map[string]*descriptor{}
	m.placed = map[*descriptor][]string{}
	m.users = map[string][]string{}
	direct := map[string][]*descriptor{}
	reached := map[string][]*descriptor{}
	order := map[*descriptor][]string{}
	for _, d := range m.p.descs {
		roots := []string{d.params}
		if d.request {
			roots = append(roots, d.result)
		}
		for _, r := range roots {
			if !slices.Contains(direct[r], d) {
				direct[r] = append(direct[r], d)
			}
			m.addUser(r, descLink(d))
			if !m.isStruct(r) { // ProgressResult: its members serve d
				for _, t := range m.refs(r) {
					m.addUser(t, descLink(d))
				}
			}
		}
		seen := map[string]bool{}
		for queue := roots; len(queue) > 0; queue = queue[1:] {
			t := queue[0]
			if seen[t] || m.p.types[t] == nil {
				continue
			}
			seen[t] = true
			reached[t] = append(reached[t], d)
			order[d] = append(order[d], t)
			queue = append(queue, m.refs(t)...)
		}
	}
	for _, name := range m.p.typeOrder {
		if m.isStruct(name) {
			for _, r := range m.refs(name) {
				m.addUser(r, typeLink(name))
			}
		}
		if !m.isStruct(name) {
			continue
		}
		switch {
		case len(direct[name]) == 1:
			m.owner[name] = direct[name][0]
		case len(direct[name]) == 0 && len(reached[name]) == 1:
			m.owner[name] = reached[name][0]
		}
	}
	for _, d := range m.p.descs {
		for _, t := range order[d] {
			if m.owner[t] == d {
				m.placed[d] = append(m.placed[d], t)
			}
		}
	}
}

func (m *md) addUser(typ, user string) {
	if !slices.Contains(m.users[typ], user) {
		m.users[typ] = append(m.users[typ], user)
	}
}

// refs lists the types a type refers to: its fields' and embedded types,
// or the names its directive mentions.
func (m *md) refs(name string) []string {
	ti := m.p.types[name]
	if ti == nil {
		return nil
	}
	var out []string
	add := func(n string) {
		if m.p.types[n] != nil && n != name && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if t, ok := directive(ti.doc); ok {
		for _, w := range strings.FieldsFunc(t, func(r rune) bool { return !isIdent(r) }) {
			add(w)
		}
		return out
	}
	ast.Inspect(ti.spec.Type, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			return false // another package's type
		case *ast.Ident:
			add(x.Name)
		}
		return true
	})
	return out
}

// checkAnchors fails when two headings would get the same anchor.
func (m *md) checkAnchors() error {
	seen := map[string]string{}
	add := func(heading string) error {
		a := slug(heading)
		if prev, ok := seen[a]; ok {
			return fmt.Errorf("headings %q and %q have the same anchor #%s", prev, heading, a)
		}
		seen[a] = heading
		return nil
	}
	for _, s := range []string{"REFERENCE", "Types", "Error codes"} {
		if err := add(s); err != nil {
			return err
		}
	}
	for _, g := range m.p.groups {
		if groupTitle(g) == "" {
			return fmt.Errorf("%s: a block of descriptors needs a doc comment, whose first sentence titles its section", m.p.fset.Position(g.decl.Pos()))
		}
		if err := add(groupTitle(g)); err != nil {
			return err
		}
		for _, d := range g.descs {
			if err := add(descHeading(d)); err != nil {
				return err
			}
		}
	}
	for _, name := range m.p.typeOrder {
		if m.isStruct(name) {
			if err := add(typeHeading(name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// descriptor writes a method's section.
func (m *md) descriptor(d *descriptor) error {
	m.printf("\n### %s\n", descHeading(d))
	doc := m.parse(d.doc.Text())
	blocks, errIntro := splitErrors(doc)
	if s := m.text(&comment.Doc{Content: blocks}, nil, d.name); s != "" {
		m.printf("\n%s\n", s)
	}
	params, err := m.role(d.params, true)
	if err != nil {
		return err
	}
	line := "**Params:** " + params
	if d.request {
		result, err := m.role(d.result, false)
		if err != nil {
			return err
		}
		line += " · **Result:** " + result
	}
	m.printf("\n%s\n", line)
	for _, name := range []string{d.params, d.result} {
		if ti := m.p.types[name]; ti != nil && !m.isStruct(name) && ti.doc != nil {
			if m.typeArgIsNull(name) {
				continue
			}
			if s := m.text(m.parse(ti.doc.Text()), nil, ""); s != "" {
				m.printf("\n%s\n", s)
			}
		}
	}
	if rows := m.errorsOf[d]; len(rows) > 0 {
		rest := strings.TrimSpace(strings.TrimPrefix(errIntro, "Errors"))
		if rest != "" {
			rest = " " + escape(rest)
		}
		m.printf("\n**Errors**%s:\n\n| code | name | when |\n|---|---|---|\n", rest)
		for _, r := range rows {
			m.printf("| %d | %s | %s |\n", r.code.value, codeName(r.code), cell(r.when))
		}
	}
	for _, name := range m.placed[d] {
		if err := m.typeSection(name, "####", false); err != nil {
			return err
		}
	}
	return nil
}

// role says what a descriptor's params or result are: none or null, a
// link to a struct type, or a type's JSON shape.
func (m *md) role(name string, params bool) (string, error) {
	if m.typeArgIsNull(name) {
		if params {
			return "none", nil
		}
		return "`null`", nil
	}
	if m.isStruct(name) {
		return typeLink(name), nil
	}
	t, err := m.typeText(&ast.Ident{Name: name})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("`%s` = %s", name, t), nil
}

// typeArgIsNull reports whether a type's directive says its JSON is null.
func (m *md) typeArgIsNull(name string) bool {
	ti := m.p.types[name]
	if ti == nil {
		return false
	}
	t, ok := directive(ti.doc)
	return ok && t == "null"
}

// typeSection writes a struct type: its doc, who uses it, its fields.
func (m *md) typeSection(name, level string, usedBy bool) error {
	ti := m.p.types[name]
	m.printf("\n%s %s\n", level, typeHeading(name))
	if ti.doc != nil {
		if s := m.text(m.parse(ti.doc.Text()), nil, ""); s != "" {
			m.printf("\n%s\n", s)
		}
	}
	if usedBy && len(m.users[name]) > 0 {
		m.printf("\nUsed by %s.\n", strings.Join(m.users[name], ", "))
	}
	st := ti.spec.Type.(*ast.StructType)
	goNames := m.fieldNames(st)
	var rows []string
	var embeds []string
	for _, f := range st.Fields.List {
		tag := jsonTag(f)
		if tag.skip {
			continue
		}
		if len(f.Names) == 0 && tag.name == "" {
			typ := f.Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			id, ok := typ.(*ast.Ident)
			if !ok || !m.isStruct(id.Name) {
				return fmt.Errorf("%s: embedded field %s: only struct types of the type files can be embedded", name, exprString(f.Type))
			}
			embeds = append(embeds, typeLink(id.Name))
			continue
		}
		doc := f.Doc
		if doc == nil {
			doc = f.Comment
		}
		names := f.Names
		if len(names) == 0 {
			names = []*ast.Ident{{Name: tag.name}}
		}
		for _, n := range names {
			if !n.IsExported() {
				continue
			}
			jname := tag.name
			if jname == "" {
				jname = n.Name
			}
			typ := f.Type
			nullable := false
			if s, ok := typ.(*ast.StarExpr); ok {
				typ, nullable = s.X, !tag.omitempty
			}
			var t string
			if tag.asString {
				t = "string"
			} else {
				var err error
				if t, err = m.typeText(typ); err != nil {
					return fmt.Errorf("%s.%s: %w", name, n.Name, err)
				}
			}
			if nullable {
				t += " | null"
			}
			required := "yes"
			if tag.omitempty || hasDefault(doc) {
				required = "no"
			}
			desc := ""
			if doc != nil {
				desc = m.text(m.parse(doc.Text()), goNames, n.Name)
			}
			rows = append(rows, fmt.Sprintf("| `%s` | %s | %s | %s |", jname, cell(t), required, cell(desc)))
		}
	}
	switch {
	case len(embeds) > 0 && len(rows) > 0:
		m.printf("\nThe fields of %s, and:\n", strings.Join(embeds, ", "))
	case len(embeds) > 0:
		m.printf("\nThe fields of %s.\n", strings.Join(embeds, ", "))
	case len(rows) == 0:
		m.printf("\nAn empty object.\n")
	}
	if len(rows) > 0 {
		m.printf("\n| field | type | required | description |\n|---|---|---|---|\n%s\n", strings.Join(rows, "\n"))
	}
	return nil
}

// codeTable writes the error codes, with the methods whose docs list each.
func (m *md) codeTable() {
	m.printf("\n## Error codes\n")
	if m.p.codesDoc != nil {
		if s := m.text(m.parse(m.p.codesDoc.Text()), nil, ""); s != "" {
			m.printf("\n%s\n", s)
		}
	}
	meaning := slices.ContainsFunc(m.p.codes, func(c errorCode) bool { return c.doc != nil })
	if meaning {
		m.printf("\n| code | name | meaning | listed by |\n|---|---|---|---|\n")
	} else {
		m.printf("\n| code | name | listed by |\n|---|---|---|\n")
	}
	for _, c := range m.p.codes {
		var by []string
		for _, d := range m.p.descs {
			if slices.ContainsFunc(m.errorsOf[d], func(r errorRow) bool { return r.code.name == c.name }) {
				by = append(by, descLink(d))
			}
		}
		if meaning {
			desc := ""
			if c.doc != nil {
				desc = m.text(m.parse(c.doc.Text()), nil, c.name)
			}
			m.printf("| %d | %s | %s | %s |\n", c.value, codeName(c), cell(desc), strings.Join(by, ", "))
		} else {
			m.printf("| %d | %s | %s |\n", c.value, codeName(c), strings.Join(by, ", "))
		}
	}
}

// errorRows reads the errors list of a descriptor's doc: a paragraph
// starting "Errors" and ending with a colon, then a list whose every item
// starts with a link to a code constant ([CodeSpawnFailed]).
func (m *md) errorRows(d *descriptor) ([]errorRow, error) {
	if d.doc == nil {
		return nil, nil
	}
	doc := m.parse(d.doc.Text())
	for i, b := range doc.Content {
		if !isErrorsIntro(b) {
			continue
		}
		if i+1 >= len(doc.Content) {
			return nil, errors.New("an errors paragraph without a list after it")
		}
		list, ok := doc.Content[i+1].(*comment.List)
		if !ok {
			return nil, errors.New("an errors paragraph without a list after it")
		}
		var rows []errorRow
		for _, item := range list.Items {
			para, ok := item.Content[0].(*comment.Paragraph)
			if !ok || len(para.Text) == 0 {
				return nil, errors.New("an errors item that is not text")
			}
			link, ok := para.Text[0].(*comment.DocLink)
			var code errorCode
			if ok {
				code, ok = m.p.code(link.Name)
			}
			if !ok {
				return nil, fmt.Errorf("errors item %q does not start with a link to an error code, like [CodeNotFound]", plainText(para.Text))
			}
			when := m.inlineText(para.Text[1:], nil)
			when = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(when), ":"))
			rows = append(rows, errorRow{code: code, when: when})
		}
		return rows, nil
	}
	return nil, nil
}

// splitErrors returns a doc's blocks without its errors paragraph and
// list, and the errors paragraph's text.
func splitErrors(doc *comment.Doc) ([]comment.Block, string) {
	for i, b := range doc.Content {
		if isErrorsIntro(b) && i+1 < len(doc.Content) {
			if _, ok := doc.Content[i+1].(*comment.List); ok {
				intro := strings.Join(strings.Fields(plainText(b.(*comment.Paragraph).Text)), " ")
				intro = strings.TrimSuffix(intro, ":")
				return slices.Concat(doc.Content[:i], doc.Content[i+2:]), intro
			}
		}
	}
	return doc.Content, ""
}

func isErrorsIntro(b comment.Block) bool {
	p, ok := b.(*comment.Paragraph)
	if !ok {
		return false
	}
	t := strings.TrimSpace(plainText(p.Text))
	return strings.HasPrefix(t, "Errors") && strings.HasSuffix(t, ":")
}

// parse parses a doc comment's text, with links to the names the
// generator knows: types, descriptors, constants, codes, and Type.Field.
func (m *md) parse(text string) *comment.Doc {
	parser := comment.Parser{LookupSym: func(recv, name string) bool {
		if recv != "" {
			ti := m.p.types[recv]
			if ti == nil {
				return false
			}
			st, ok := ti.spec.Type.(*ast.StructType)
			return ok && m.fieldNames(st)[name] != ""
		}
		if m.p.types[name] != nil || m.desc(name) != nil {
			return true
		}
		if _, ok := m.p.code(name); ok {
			return true
		}
		_, ok := m.p.strConsts[name]
		return ok
	}}
	return parser.Parse(text)
}

func (m *md) desc(name string) *descriptor {
	for _, d := range m.p.descs {
		if d.name == name {
			return d
		}
	}
	return nil
}

// text renders a doc as Markdown. goNames maps the Go names of a struct's
// fields to their JSON names, which the text then uses. A doc that begins
// with name, as Go docs do, loses it: "Argv is the command…" becomes "the
// command…", and outside a struct (goNames nil) "RunCommandRequest runs…"
// becomes "Runs…".
func (m *md) text(doc *comment.Doc, goNames map[string]string, name string) string {
	var parts []string
	for i, b := range doc.Content {
		var s string
		switch b := b.(type) {
		case *comment.Paragraph:
			texts := b.Text
			if i == 0 && name != "" && len(texts) > 0 {
				if first, ok := texts[0].(comment.Plain); ok {
					texts = slices.Concat([]comment.Text{comment.Plain(dropName(string(first), name, goNames == nil))}, texts[1:])
				}
			}
			s = m.inlineText(texts, goNames)
		case *comment.Heading:
			s = "**" + m.inlineText(b.Text, goNames) + "**"
		case *comment.List:
			var items []string
			for j, item := range b.Items {
				var sub []string
				for _, c := range item.Content {
					if p, ok := c.(*comment.Paragraph); ok {
						sub = append(sub, m.inlineText(p.Text, goNames))
					}
				}
				bullet := "-"
				if item.Number != "" {
					bullet = strconv.Itoa(j+1) + "."
				}
				items = append(items, bullet+" "+strings.Join(sub, " "))
			}
			s = strings.Join(items, "\n")
		case *comment.Code:
			s = "```\n" + strings.TrimRight(b.Text, "\n") + "\n```"
		}
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// dropName removes a leading name followed by "is " or "are ", or, when
// verb is set, by any verb, which it capitalises ("runs" → "Runs").
func dropName(s, name string, verb bool) string {
	rest, ok := strings.CutPrefix(s, name+" ")
	if !ok {
		return s
	}
	for _, v := range []string{"is ", "are "} {
		if r, ok := strings.CutPrefix(rest, v); ok {
			return r
		}
	}
	if !verb {
		return s
	}
	r, size := utf8.DecodeRuneInString(rest)
	return string(unicode.ToUpper(r)) + rest[size:]
}

// inlineText renders a paragraph's text on one line: plain text escaped,
// doc links as links to their sections, Go field names as JSON names.
func (m *md) inlineText(texts []comment.Text, goNames map[string]string) string {
	var b strings.Builder
	for _, t := range texts {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(escape(renameFields(string(t), goNames)))
		case comment.Italic:
			b.WriteString("*" + escape(string(t)) + "*")
		case *comment.Link:
			fmt.Fprintf(&b, "[%s](%s)", m.inlineText(t.Text, goNames), t.URL)
		case *comment.DocLink:
			b.WriteString(m.docLink(t))
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// docLink renders a link to a name of the protocol.
func (m *md) docLink(l *comment.DocLink) string {
	if l.Recv != "" {
		st := m.p.types[l.Recv].spec.Type.(*ast.StructType)
		return fmt.Sprintf("[`%s.%s`](#%s)", l.Recv, m.fieldNames(st)[l.Name], slug(typeHeading(l.Recv)))
	}
	if d := m.desc(l.Name); d != nil {
		return descLink(d)
	}
	if c, ok := m.p.code(l.Name); ok {
		return fmt.Sprintf("[%d %s](#error-codes)", c.value, codeName(c))
	}
	if m.isStruct(l.Name) {
		return typeLink(l.Name)
	}
	if v, ok := m.p.strConsts[l.Name]; ok {
		return "`" + v + "`"
	}
	return "`" + l.Name + "`"
}

// typeText is a field's type as JSON readers know it, with links to struct
// types.
func (m *md) typeText(e ast.Expr) (string, error) {
	switch t := e.(type) {
	case *ast.Ident:
		if kind, ok := basicKind(t.Name); ok {
			return kind, nil
		}
		if t.Name == "any" {
			return "any", nil
		}
		ti := m.p.types[t.Name]
		if ti == nil {
			return "", fmt.Errorf("type %s is not declared in the type files", t.Name)
		}
		if d, ok := directive(ti.doc); ok {
			return m.linkNames(d), nil
		}
		if m.p.marshalers[t.Name] {
			return "any", nil
		}
		if m.isStruct(t.Name) {
			return typeLink(t.Name), nil
		}
		if vals := m.p.enums[t.Name]; len(vals) > 0 {
			return strings.Join(vals, " | "), nil
		}
		return m.typeText(ti.spec.Type)
	case *ast.StarExpr:
		inner, err := m.typeText(t.X)
		if id, ok := t.X.(*ast.Ident); ok && m.p.types[id.Name] != nil {
			return inner, err
		}
		return inner + " | null", err
	case *ast.ArrayType:
		if id, ok := t.Elt.(*ast.Ident); ok && (id.Name == "byte" || id.Name == "uint8") && t.Len == nil {
			return "string (base64)", nil
		}
		elt, err := m.typeText(t.Elt)
		if strings.Contains(elt, " ") {
			elt = "(" + elt + ")"
		}
		return elt + "[]", err
	case *ast.MapType:
		v, err := m.typeText(t.Value)
		return "{string: " + v + "}", err
	case *ast.SelectorExpr:
		switch exprString(t) {
		case "json.RawMessage":
			return "any", nil
		case "time.Time":
			return "string (RFC 3339)", nil
		case "time.Duration":
			return "integer", nil
		}
		return "any", nil
	case *ast.InterfaceType:
		return "any", nil
	case *ast.StructType:
		return "object", nil
	case *ast.ParenExpr:
		return m.typeText(t.X)
	}
	return "", fmt.Errorf("unsupported type %s", exprString(e))
}

// linkNames links the struct types a directive's TypeScript names.
func (m *md) linkNames(t string) string {
	return mapIdents(t, func(w string) string {
		if m.isStruct(w) {
			return typeLink(w)
		}
		return w
	})
}

// mapIdents returns s with each identifier w in it replaced by f(w).
func mapIdents(s string, f func(w string) string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexFunc(s, isIdent)
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !isIdent(r) })
		if j < 0 {
			j = len(s)
		}
		b.WriteString(f(s[:j]))
		s = s[j:]
	}
	return b.String()
}

// fieldNames maps a struct's Go field names to their JSON names, the
// fields of the structs it embeds included.
func (m *md) fieldNames(st *ast.StructType) map[string]string {
	names := map[string]string{}
	for _, f := range st.Fields.List {
		tag := jsonTag(f)
		if id, ok := f.Type.(*ast.Ident); ok && len(f.Names) == 0 && tag.name == "" && m.isStruct(id.Name) {
			for g, j := range m.fieldNames(m.p.types[id.Name].spec.Type.(*ast.StructType)) {
				names[g] = j
			}
		}
		for _, n := range f.Names {
			if tag.skip || !n.IsExported() {
				continue
			}
			names[n.Name] = tag.name
			if tag.name == "" {
				names[n.Name] = n.Name
			}
		}
	}
	return names
}

// renameFields replaces the Go names of fields in s by their JSON names,
// as code: "ExitCode" → "`exitCode`".
func renameFields(s string, goNames map[string]string) string {
	if len(goNames) == 0 {
		return s
	}
	return mapIdents(s, func(w string) string {
		if js, ok := goNames[w]; ok {
			return "`" + js + "`"
		}
		return w
	})
}

// escape escapes the Markdown of plain doc text outside `code spans`: an
// asterisk would start emphasis and a < an HTML tag.
func escape(s string) string {
	parts := strings.Split(s, "`")
	for i := 0; i < len(parts); i += 2 {
		if i == len(parts)-1 && len(parts)%2 == 0 {
			break // an unpaired backtick: leave the rest alone
		}
		parts[i] = strings.NewReplacer(`\`, `\\`, "*", `\*`, "<", "&lt;").Replace(parts[i])
	}
	return strings.Join(parts, "`")
}

// cell makes text fit in a table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// plainText returns the text of a paragraph, links as their text.
func plainText(texts []comment.Text) string {
	var b strings.Builder
	for _, t := range texts {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(string(t))
		case comment.Italic:
			b.WriteString(string(t))
		case *comment.Link:
			b.WriteString(plainText(t.Text))
		case *comment.DocLink:
			b.WriteString(plainText(t.Text))
		}
	}
	return b.String()
}

// groupTitle is the first sentence of a descriptor block's doc, without
// its period: the title of its section.
func groupTitle(g descGroup) string {
	text := strings.TrimSpace(g.doc.Text())
	if i := strings.Index(text, ". "); i >= 0 {
		text = text[:i]
	}
	return strings.Join(strings.Fields(strings.TrimSuffix(text, ".")), " ")
}

// afterFirstSentence returns the text after the first sentence.
func afterFirstSentence(text string) string {
	text = strings.TrimSpace(text)
	if i := strings.Index(text, ". "); i >= 0 {
		return strings.TrimSpace(text[i+2:])
	}
	return ""
}

func descHeading(d *descriptor) string {
	kind := "Notification"
	if d.request {
		kind = "Request"
	}
	return fmt.Sprintf("%s `%s`", kind, d.method)
}

func descLink(d *descriptor) string {
	return fmt.Sprintf("[`%s`](#%s)", d.method, slug(descHeading(d)))
}

func typeHeading(name string) string { return "Type `" + name + "`" }

func typeLink(name string) string {
	return fmt.Sprintf("[`%s`](#%s)", name, slug(typeHeading(name)))
}

func codeName(c errorCode) string { return strings.TrimPrefix(c.name, "Code") }

// slug is the anchor GitHub gives a heading: lower case, punctuation but
// hyphens and underscores dropped, spaces made hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isIdent(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
