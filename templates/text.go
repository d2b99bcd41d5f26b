package templates

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
	"unicode/utf8"
)

const (
	// maxOutput bounds the bytes all strings of one template object render
	// to, and any single string a template builds with print, printf or
	// println. The API server stores no object above 1.5 MiB anyway.
	maxOutput = 1 << 20
	// maxSteps bounds the range iterations and template calls of all the
	// strings of one template object together, so that no template keeps
	// the controller busy: 2,000 strings of 9,999 iterations each would
	// otherwise take tens of seconds.
	maxSteps = 20000
	// renderTimeout bounds the time one template object takes to render,
	// whatever it spends it on. It is checked before every action, in
	// every function a template calls, at every write of output and
	// before every value of the object; between two checks a template can
	// do no more than one call's bounded work (see maxCallWork).
	renderTimeout = 500 * time.Millisecond
	// maxCallWork bounds the bytes one call of print, printf, println,
	// join, html, js or urlquery may format, estimated from its arguments
	// before anything is formatted: a 1 KiB format repeating %[1]s a
	// thousand times over a 1 MiB argument would otherwise build a
	// gigabyte in one call, out of reach of the deadline.
	maxCallWork = 4 * maxOutput
	// maxWidth bounds the width and precision of a printf verb, checked
	// before anything is formatted: %999999999d would allocate a gigabyte
	// before the length of the result could be checked.
	maxWidth = 256

	// templateName names each parsed string; it is cut out of error
	// messages, which carry the field path instead.
	templateName = "value"
	// valueFunc, stepFunc and tickFunc are called by actions the engine
	// adds to each parsed string (see instrument). Their names start with
	// an underscore so that they do not clash with the functions templates
	// call.
	valueFunc = "_value"
	stepFunc  = "_step"
	tickFunc  = "_tick"
)

var (
	errOutputTooLarge = fmt.Errorf("the template renders more than %d bytes", maxOutput)
	errTooManySteps   = fmt.Errorf("the template object runs more than %d range iterations and template calls", maxSteps)
	errTooSlow        = fmt.Errorf("the template object takes more than %v to render", renderTimeout)
	errWidth          = fmt.Errorf("printf: a width or precision above %d", maxWidth)
)

// stepBudget counts the steps of one template object and watches its
// deadline.
type stepBudget struct {
	left     int
	deadline time.Time
}

func newStepBudget(now time.Time) *stepBudget {
	return &stepBudget{left: maxSteps, deadline: now.Add(renderTimeout)}
}

// step takes one step.
func (b *stepBudget) step() (string, error) {
	b.left--
	if b.left < 0 {
		return "", errTooManySteps
	}
	return "", b.check()
}

// check reports errTooSlow once the deadline has passed.
func (b *stepBudget) check() error {
	if time.Now().After(b.deadline) {
		return errTooSlow
	}
	return nil
}

// tick is check as a template function, for the actions instrument adds.
func (b *stepBudget) tick() (string, error) {
	return "", b.check()
}

// funcs are the functions templates call, each of which checks the
// deadline of b before it does any work and bounds the work it does: the
// builtins that format or compare (print, printf, println, html, js,
// urlquery, eq, ne, lt, le, gt, ge) are replaced by bounded versions that
// give the same results, the others (and, or, not, len, index, slice,
// call) cost the same whatever their arguments hold.
func funcs(b *stepBudget) template.FuncMap {
	guard := func(f func(...any) string) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			if err := b.check(); err != nil {
				return "", err
			}
			if _, err := argsCost(args, maxOutput); err != nil {
				return "", err
			}
			return checkLen(f(args...))
		}
	}
	compare := func(f func(reflect.Value, reflect.Value) (bool, error)) func(reflect.Value, reflect.Value) (bool, error) {
		return func(a, c reflect.Value) (bool, error) {
			if err := b.check(); err != nil {
				return false, err
			}
			return f(a, c)
		}
	}
	return template.FuncMap{
		"join": func(sep string, items []string) (string, error) {
			if err := b.check(); err != nil {
				return "", err
			}
			return join(sep, items)
		},
		"print":    guard(fmt.Sprint),
		"println":  guard(fmt.Sprintln),
		"html":     guard(template.HTMLEscaper),
		"js":       guard(template.JSEscaper),
		"urlquery": guard(template.URLQueryEscaper),
		"printf": func(format string, args ...any) (string, error) {
			if err := b.check(); err != nil {
				return "", err
			}
			if err := checkFormat(format, args); err != nil {
				return "", err
			}
			return checkLen(fmt.Sprintf(format, args...))
		},
		"eq": func(a reflect.Value, others ...reflect.Value) (bool, error) {
			return equal(b.check, a, others...)
		},
		"ne": compare(func(a, c reflect.Value) (bool, error) {
			eq, err := equal(nil, a, c)
			return !eq, err
		}),
		"lt": compare(less),
		"le": compare(func(a, c reflect.Value) (bool, error) {
			if lt, err := less(a, c); lt || err != nil {
				return lt, err
			}
			return equal(nil, a, c)
		}),
		"gt": compare(func(a, c reflect.Value) (bool, error) {
			if lt, err := less(a, c); lt || err != nil {
				return false, err
			}
			eq, err := equal(nil, a, c)
			return !eq, err
		}),
		"ge": compare(func(a, c reflect.Value) (bool, error) {
			lt, err := less(a, c)
			return !lt && err == nil, err
		}),
		valueFunc: func(v any) (any, error) {
			if err := b.check(); err != nil {
				return nil, err
			}
			return printable(v), nil
		},
		stepFunc: b.step,
		tickFunc: b.tick,
	}
}

// execute renders one string of the template object. single reports whether
// src was exactly one action, for the integer fallback of kinds whose Go
// types are unknown.
func (r *renderer) execute(src string) (out string, single bool, err error) {
	if err := r.steps.check(); err != nil {
		return "", false, err
	}
	if !strings.Contains(src, "{{") {
		return src, false, r.out.take(len(src))
	}
	if r.funcs == nil {
		r.funcs = funcs(r.steps)
	}
	t, err := template.New(templateName).Option("missingkey=error").Funcs(r.funcs).Parse(src)
	if err != nil {
		return "", false, cleanError(err)
	}
	if err := r.steps.check(); err != nil {
		return "", false, err
	}
	if t.Tree != nil && t.Tree.Root != nil {
		nodes := t.Tree.Root.Nodes
		if len(nodes) == 1 && nodes[0].Type() == parse.NodeAction {
			single = true
		}
	}
	for _, tt := range t.Templates() {
		if tt.Tree != nil && tt.Tree.Root != nil {
			instrument(tt.Tree.Root)
			tt.Tree.Root.Nodes = append([]parse.Node{funcAction(stepFunc, tt.Tree.Root.Pos)}, tt.Tree.Root.Nodes...)
		}
	}
	w := &budgetWriter{budget: r.out, steps: r.steps}
	if err := t.Execute(w, r.dot); err != nil {
		return "", false, cleanError(err)
	}
	return w.buf.String(), single, nil
}

// instrument rewrites a parsed template in place, the way html/template adds
// its escapers: every action that prints gets the function valueFunc as its
// last command, so a nil pointer (such as an unset .Spec.Endpoint.NodePort)
// prints as "" instead of "<nil>"; every range body starts with an action
// calling stepFunc, which counts iterations against maxSteps; and every
// action, if, with and range is preceded by an action calling tickFunc,
// which checks the deadline, so that a template made of builtins alone (a
// thousand {{ if eq $a $b }}) still meets it.
func instrument(list *parse.ListNode) {
	if list == nil {
		return
	}
	nodes := make([]parse.Node, 0, 2*len(list.Nodes))
	for _, n := range list.Nodes {
		switch n.(type) {
		// A template call needs none: the called template starts with
		// stepFunc, which checks the deadline too.
		case *parse.ActionNode, *parse.IfNode, *parse.WithNode, *parse.RangeNode:
			nodes = append(nodes, funcAction(tickFunc, n.Position()))
		}
		nodes = append(nodes, n)
	}
	list.Nodes = nodes
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 {
				n.Pipe.Cmds = append(n.Pipe.Cmds, identCommand(valueFunc, n.Pos))
			}
		case *parse.IfNode:
			instrument(n.List)
			instrument(n.ElseList)
		case *parse.WithNode:
			instrument(n.List)
			instrument(n.ElseList)
		case *parse.RangeNode:
			instrument(n.List)
			instrument(n.ElseList)
			if n.List != nil {
				n.List.Nodes = append([]parse.Node{funcAction(stepFunc, n.Pos)}, n.List.Nodes...)
			}
		}
	}
}

func identCommand(name string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{
		NodeType: parse.NodeCommand,
		Pos:      pos,
		Args:     []parse.Node{parse.NewIdentifier(name).SetPos(pos)},
	}
}

// funcAction is an action calling the function name, which prints "".
func funcAction(name string, pos parse.Pos) *parse.ActionNode {
	return &parse.ActionNode{
		NodeType: parse.NodeAction,
		Pos:      pos,
		Pipe: &parse.PipeNode{
			NodeType: parse.NodePipe,
			Pos:      pos,
			Cmds:     []*parse.CommandNode{identCommand(name, pos)},
		},
	}
}

// printable is the last command of every printing action: nil pointers and
// nil interfaces print as "", anything else as text/template prints it.
func printable(v any) any {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) {
		if rv.IsNil() {
			return ""
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return ""
	}
	return v
}

// join is the one function added to the text/template builtins: it joins a
// list of strings, such as .Spec.Endpoint.Addresses, with sep. Its argument
// order follows Helm's join, so {{ .Spec.Endpoint.Addresses | join "," }}
// reads naturally.
func join(sep string, items []string) (string, error) {
	n := 0
	for i, item := range items {
		if n += len(item); i > 0 {
			n += len(sep)
		}
		if n > maxOutput {
			return "", errOutputTooLarge
		}
	}
	return strings.Join(items, sep), nil
}

// argsCost is an upper bound of the bytes fmt.Sprint, html, js or urlquery
// write for args, within a factor of six (the longest escape of a byte),
// computed only until it passes limit: errOutputTooLarge then, before
// anything is formatted, so a template cannot grow a string without bound
// (by doubling a variable in a range, or by printing it a thousand times
// in one call).
func argsCost(args []any, limit int) (int, error) {
	n := 0
	for _, a := range args {
		if n += argSize(a) + 1; n > limit {
			return n, errOutputTooLarge
		}
	}
	return n, nil
}

// argSize is the length of a string or byte slice, and of the Go syntax
// of anything else (%#v, its longest common form). Values other than
// strings come from the gateway, which the API server bounds.
func argSize(a any) int {
	v := reflect.ValueOf(a)
	switch {
	case !v.IsValid():
		return len("<nil>")
	case v.Kind() == reflect.String:
		return v.Len()
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		return v.Len()
	}
	return len(fmt.Sprintf("%#v", a))
}

// checkFormat refuses a printf format whose verbs ask for a width or a
// precision above maxWidth, written in the format or taken from an
// argument with '*' (errWidth), and one whose output could pass
// maxCallWork (errOutputTooLarge), before anything is formatted. It walks
// the format as fmt does, argument indexes ([n]) included, so that the
// bound counts each argument as often as a verb prints it.
func checkFormat(format string, args []any) error {
	sizes := make([]int, len(args))
	size := func(i int) int {
		if sizes[i] == 0 {
			sizes[i] = argSize(args[i]) + 1
		}
		return sizes[i] - 1
	}
	cost := 0
	arg := 0
	reordered := false
	// index reads an argument index, [n], at i: fmt's argNumber.
	index := func(i int) (int, bool) {
		if i >= len(format) || format[i] != '[' {
			return i, true
		}
		reordered = true
		n, j := formatNumber(format, i+1)
		if j >= len(format) || format[j] != ']' {
			return i + 1, false
		}
		if n < 1 || n > len(args) {
			return j + 1, false
		}
		arg = n - 1
		return j + 1, true
	}
	// star reads the width or precision an argument gives.
	star := func() (int, error) {
		if arg >= len(args) {
			return 0, nil
		}
		v := reflect.ValueOf(args[arg])
		arg++
		switch {
		case v.CanInt() && (v.Int() > maxWidth || v.Int() < -maxWidth), v.CanUint() && v.Uint() > maxWidth:
			return 0, errWidth
		case v.CanInt():
			return int(max(v.Int(), -v.Int())), nil
		case v.CanUint():
			return int(v.Uint()), nil
		}
		return 0, nil
	}
	for i := 0; i < len(format); {
		if format[i] != '%' {
			cost++
			i++
			continue
		}
		i++
		sharp := false
		for ; i < len(format) && strings.IndexByte("#0+- ", format[i]) >= 0; i++ {
			sharp = sharp || format[i] == '#'
		}
		good := true
		track := func(j int, ok bool) int {
			good = good && ok
			return j
		}
		i = track(index(i))
		width, precision := 0, 0
		if i < len(format) && format[i] == '*' {
			w, err := star()
			if err != nil {
				return err
			}
			width, i = w, i+1
		} else {
			if width, i = formatNumber(format, i); width > maxWidth {
				return errWidth
			}
		}
		if i < len(format) && format[i] == '.' {
			if i = track(index(i + 1)); i < len(format) && format[i] == '*' {
				p, err := star()
				if err != nil {
					return err
				}
				precision, i = p, i+1
			} else if precision, i = formatNumber(format, i); precision > maxWidth {
				return errWidth
			}
		}
		i = track(index(i))
		if i >= len(format) {
			cost += len("%!(NOVERB)")
			break
		}
		verb, n := utf8.DecodeRuneInString(format[i:])
		i += n
		// What fmt writes for a verb is at most its padding and its
		// precision, 1 KiB (the digits of the largest float), and its
		// argument, grown six times at most by escaping; a list, map or
		// struct pads each of its elements.
		cost += 2*(width+precision) + 1<<10
		if verb != '%' && good && arg < len(args) {
			v := reflect.ValueOf(args[arg])
			factor := 6
			if (verb == 's' || verb == 'v') && !sharp && v.Kind() == reflect.String {
				factor = 1
			}
			switch v.Kind() {
			case reflect.Array, reflect.Slice, reflect.Map, reflect.Struct, reflect.Pointer, reflect.Interface:
				cost += (width + precision + factor) * size(arg)
			default:
				cost += factor * size(arg)
			}
			arg++
		}
		if cost > maxCallWork {
			return errOutputTooLarge
		}
	}
	if !reordered {
		// fmt prints the arguments no verb took, with their types.
		for ; arg < len(args); arg++ {
			if cost += 1<<10 + 6*size(arg); cost > maxCallWork {
				return errOutputTooLarge
			}
		}
	}
	return nil
}

// formatNumber reads the decimal number at i of a format, saturating just
// above maxWidth, and returns it and the index after it.
func formatNumber(format string, i int) (int, int) {
	n := 0
	for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
		if n = n*10 + int(format[i]-'0'); n > maxWidth {
			n = maxWidth + 1
		}
	}
	return n, i
}

func checkLen(s string) (string, error) {
	if len(s) > maxOutput {
		return "", errOutputTooLarge
	}
	return s, nil
}

// outputBudget is the number of bytes the strings of one template object may
// still render to.
type outputBudget struct{ left int }

func (b *outputBudget) take(n int) error {
	if n > b.left {
		return errOutputTooLarge
	}
	b.left -= n
	return nil
}

// budgetWriter collects the output of one string, charging it to a budget
// and checking the deadline at every write.
type budgetWriter struct {
	budget *outputBudget
	steps  *stepBudget
	buf    strings.Builder
}

func (w *budgetWriter) Write(p []byte) (int, error) {
	if err := w.steps.check(); err != nil {
		return 0, err
	}
	if err := w.budget.take(len(p)); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// templateError is a text/template error without the internal template
// name, which means nothing to the reader: the caller adds the field path.
type templateError struct {
	msg string
	err error
}

func (e *templateError) Error() string { return e.msg }
func (e *templateError) Unwrap() error { return e.err }

func cleanError(err error) error {
	msg := strings.Replace(err.Error(), "template: "+templateName+":", "", 1)
	msg = strings.Replace(msg, "executing \""+templateName+"\" ", "", 1)
	// The step counter and the deadline are the engine's, not the
	// template's: their names would only puzzle the reader.
	for _, f := range []string{stepFunc, tickFunc, valueFunc} {
		msg = strings.Replace(msg, "at <"+f+">: error calling "+f+": ", "", 1)
	}
	return &templateError{msg: excerpt(strings.TrimSpace(msg), maxErrorText), err: err}
}

// maxErrorText bounds the template text an error quotes: a condition
// message holds at most 32768 bytes, and a reader needs the start of a
// long template, not all of it.
const maxErrorText = 512

// excerpt is s cut to at most about limit bytes, keeping its start and its
// end (where text/template puts the reason) around an ellipsis.
func excerpt(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head, tail := limit/2, limit/4
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	cut := len(s) - tail
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return fmt.Sprintf("%s ... (%d bytes) ... %s", s[:head], cut-head, s[cut:])
}

// quoteTemplate quotes the template text src for an error message, cut to
// maxErrorText bytes.
func quoteTemplate(src string) string {
	return strconv.Quote(excerpt(src, maxErrorText))
}
