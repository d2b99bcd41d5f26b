package templates

import (
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
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
	// whatever it spends it on; it is checked at every step.
	renderTimeout = 500 * time.Millisecond
	// maxWidth bounds the width and precision of a printf verb, checked
	// before anything is formatted: %999999999d would allocate a gigabyte
	// before the length of the result could be checked.
	maxWidth = 256

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
	switch {
	case b.left < 0:
		return "", errTooManySteps
	case time.Now().After(b.deadline):
		return "", errTooSlow
	}
	return "", nil
}

// execute renders one string of the template object. single reports whether
// src was exactly one action, for the integer fallback of kinds whose Go
// types are unknown.
func (r *renderer) execute(src string) (out string, single bool, err error) {
	if !strings.Contains(src, "{{") {
		return src, false, r.out.take(len(src))
	}
	funcs := template.FuncMap{
		"join":    join,
		"print":   bounded(fmt.Sprint),
		"println": bounded(fmt.Sprintln),
		"printf": func(format string, args ...any) (string, error) {
			if err := checkFormat(format, args); err != nil {
				return "", err
			}
			return checkLen(fmt.Sprintf(format, args...))
		},
		valueFunc: printable,
		stepFunc:  r.steps.step,
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

// checkFormat refuses a printf format whose verbs ask for a width or a
// precision above maxWidth, written in the format or taken from an
// argument with '*'.
func checkFormat(format string, args []any) error {
	arg := 0
	number := func(i int) (int, int) {
		n := 0
		for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
			if n = n*10 + int(format[i]-'0'); n > maxWidth {
				n = maxWidth + 1
			}
		}
		return n, i
	}
	// star checks the argument a '*' takes.
	star := func() error {
		if arg < len(args) {
			if v := reflect.ValueOf(args[arg]); v.CanInt() && (v.Int() > maxWidth || v.Int() < -maxWidth) ||
				v.CanUint() && v.Uint() > maxWidth {
				return errWidth
			}
		}
		arg++
		return nil
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		for pass := 0; pass < 2; pass++ {
			// An explicit argument index: [n].
			if i < len(format) && format[i] == '[' {
				n, j := number(i + 1)
				if j < len(format) && format[j] == ']' {
					arg, i = n-1, j+1
				}
			}
			var n int
			switch {
			case i < len(format) && format[i] == '*':
				if err := star(); err != nil {
					return err
				}
				i++
			default:
				if n, i = number(i); n > maxWidth {
					return errWidth
				}
			}
			if pass == 0 && i < len(format) && format[i] == '.' {
				i++
				continue
			}
			break
		}
		if i < len(format) && format[i] == '[' {
			if n, j := number(i + 1); j < len(format) && format[j] == ']' {
				arg, i = n-1, j+1
			}
		}
		if i < len(format) && format[i] != '%' {
			arg++
		}
	}
	return nil
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
