package templates

import (
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

const (
	// maxOutput bounds the bytes all strings of one template object render
	// to, and any single string a template builds with print, printf or
	// println. The API server stores no object above 1.5 MiB anyway.
	maxOutput = 1 << 20
	// maxSteps bounds, per string, the range iterations and template calls,
	// so that no template keeps the controller busy.
	maxSteps = 10000

	// templateName names each parsed string; it is cut out of error
	// messages, which carry the field path instead.
	templateName = "value"
	// valueFunc and stepFunc are called by actions the engine adds to each
	// parsed string (see instrument). Their names start with an underscore
	// so that they do not clash with the functions templates call.
	valueFunc = "_value"
	stepFunc  = "_step"
)

var (
	errOutputTooLarge = fmt.Errorf("the template renders more than %d bytes", maxOutput)
	errTooManySteps   = fmt.Errorf("the template runs more than %d range iterations and template calls", maxSteps)
)

// execute renders one string of the template object. single reports whether
// src was exactly one action, for the integer fallback of kinds whose Go
// types are unknown.
func (r *renderer) execute(src string) (out string, single bool, err error) {
	if !strings.Contains(src, "{{") {
		return src, false, r.out.take(len(src))
	}
	steps := maxSteps
	funcs := template.FuncMap{
		"join":    join,
		"print":   bounded(fmt.Sprint),
		"println": bounded(fmt.Sprintln),
		"printf": func(format string, args ...any) (string, error) {
			return checkLen(fmt.Sprintf(format, args...))
		},
		valueFunc: printable,
		stepFunc: func() (string, error) {
			steps--
			if steps < 0 {
				return "", errTooManySteps
			}
			return "", nil
		},
	}
	t, err := template.New(templateName).Option("missingkey=error").Funcs(funcs).Parse(src)
	if err != nil {
		return "", false, cleanError(err)
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
			tt.Tree.Root.Nodes = append([]parse.Node{stepAction(tt.Tree.Root.Pos)}, tt.Tree.Root.Nodes...)
		}
	}
	w := &budgetWriter{budget: r.out}
	if err := t.Execute(w, r.dot); err != nil {
		return "", false, cleanError(err)
	}
	return w.buf.String(), single, nil
}

// instrument rewrites a parsed template in place, the way html/template adds
// its escapers: every action that prints gets the function valueFunc as its
// last command, so a nil pointer (such as an unset .Spec.Endpoint.NodePort)
// prints as "" instead of "<nil>"; every range body starts with an action
// calling stepFunc, which counts iterations against maxSteps.
func instrument(list *parse.ListNode) {
	if list == nil {
		return
	}
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
				n.List.Nodes = append([]parse.Node{stepAction(n.Pos)}, n.List.Nodes...)
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

func stepAction(pos parse.Pos) *parse.ActionNode {
	return &parse.ActionNode{
		NodeType: parse.NodeAction,
		Pos:      pos,
		Pipe: &parse.PipeNode{
			NodeType: parse.NodePipe,
			Pos:      pos,
			Cmds:     []*parse.CommandNode{identCommand(stepFunc, pos)},
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
	return checkLen(strings.Join(items, sep))
}

// bounded wraps a builtin print function so that a template cannot grow a
// string without bound, for example by doubling a variable in a range.
func bounded(f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		return checkLen(f(args...))
	}
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

// budgetWriter collects the output of one string, charging it to a budget.
type budgetWriter struct {
	budget *outputBudget
	buf    strings.Builder
}

func (w *budgetWriter) Write(p []byte) (int, error) {
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
	// The step counter is the engine's, not the template's: its name would
	// only puzzle the reader.
	msg = strings.Replace(msg, "at <"+stepFunc+">: error calling "+stepFunc+": ", "", 1)
	return &templateError{msg: strings.TrimSpace(msg), err: err}
}
