package bundles

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// luaCheckTimeout is how long Argo CD lets one health check run.
const luaCheckTimeout = time.Second

// invalidHealthStatus is the message of the Unknown health Argo CD reports
// when a check returns a status it does not know.
const invalidHealthStatus = "Lua returned an invalid health status"

// health is what an Argo CD health check returns: the {status, message}
// table of the script.
type health struct {
	Status  string
	Message string
}

// knownHealthStatus tells whether Argo CD accepts s as a health status.
func knownHealthStatus(s string) bool {
	switch s {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return true
	}
	return false
}

// runHealthCheck runs a Lua health check of argocd-cm on obj, an object as
// decoded from the API server's JSON, the way Argo CD runs such a check in
// gopher-lua: a fresh VM with only the package, base and table libraries,
// obj as the global obj, a time limit, and the value the script returns
// read as a table of strings status and message.
//
// Argo CD also gives these checks an os library cut down to time and date.
// No check here needs it, so it is left out: a check calling it fails here
// rather than pass on a function Argo CD may not expose the same way.
func runHealthCheck(script string, obj map[string]any) (health, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return health{}, fmt.Errorf("open Lua library %q: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), luaCheckTimeout)
	defer cancel()
	L.SetContext(ctx)
	L.SetGlobal("obj", luaValue(L, obj))
	if err := L.DoString(script); err != nil {
		return health{}, err
	}
	ret := L.Get(-1)
	table, ok := ret.(*lua.LTable)
	if !ok {
		return health{}, fmt.Errorf("the check returned a %s, want a table", ret.Type())
	}
	var h health
	for _, f := range []struct {
		name string
		dst  *string
	}{{"status", &h.Status}, {"message", &h.Message}} {
		switch v := table.RawGetString(f.name).(type) {
		case lua.LString:
			*f.dst = string(v)
		case *lua.LNilType:
		default:
			// Argo CD decodes the table through JSON into strings.
			return health{}, fmt.Errorf("the check returned a %s as %s, want a string", v.Type(), f.name)
		}
	}
	if !knownHealthStatus(h.Status) {
		return health{Status: "Unknown", Message: invalidHealthStatus}, nil
	}
	return h, nil
}

// luaValue converts a value of an object decoded from JSON as Argo CD does:
// numbers, whether the API machinery decoded them as int64 or float64, are
// Lua numbers; a json.Number is a string; an array is a table indexed from
// 1; an object is a table keyed by field name; null, and any type it does
// not know, is nil.
func luaValue(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case []any:
		t := L.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(luaValue(L, item))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetString(key, luaValue(L, item))
		}
		return t
	}
	return lua.LNil
}

// TestHealthCheckRunner holds runHealthCheck to what a check may rely on in
// Argo CD: the conversions of JSON values, the libraries it has and those
// it lacks, and the handling of what the script returns.
func TestHealthCheckRunner(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"generation": int64(3), "name": "x"},
		"spec": map[string]any{
			"list":   []any{"a", "b"},
			"ratio":  0.5,
			"number": json.Number("42"),
			"none":   nil,
		},
	}
	for _, tc := range []struct {
		name, script string
		want         health
		err          string
	}{
		{name: "int64 is a number that prints without a fraction",
			script: `return {status = "Healthy", message = "generation " .. obj.metadata.generation .. " " .. tostring(obj.metadata.generation + 1 == 4)}`,
			want:   health{"Healthy", "generation 3 true"}},
		{name: "arrays count from 1",
			script: `return {status = "Healthy", message = #obj.spec.list .. obj.spec.list[1] .. obj.spec.list[2]}`,
			want:   health{"Healthy", "2ab"}},
		{name: "ipairs and table are there",
			script: `local t = {}; for _, s in ipairs(obj.spec.list) do table.insert(t, s) end; return {status = "Healthy", message = table.concat(t, ",")}`,
			want:   health{"Healthy", "a,b"}},
		{name: "floats, json.Number and null",
			script: `return {status = "Healthy", message = obj.spec.ratio .. " " .. type(obj.spec.number) .. " " .. tostring(obj.spec.none)}`,
			want:   health{"Healthy", "0.5 string nil"}},
		{name: "no message", script: `return {status = "Progressing"}`, want: health{Status: "Progressing"}},
		{name: "unknown status", script: `return {status = "Fine", message = "?"}`, want: health{"Unknown", invalidHealthStatus}},
		{name: "no string library", script: `return {status = "Healthy", message = string.format("%d", 1)}`, err: "key 'format'"},
		{name: "no os library", script: `os.exit(1)`, err: "key 'exit'"},
		{name: "no io library", script: `io.write("x")`, err: "key 'write'"},
		{name: "nothing returned", script: `local x = 1`, err: "returned a nil"},
		{name: "status not a string", script: `return {status = 1}`, err: "number as status"},
		{name: "endless loop", script: `while true do end`, err: "context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runHealthCheck(tc.script, obj)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, error %v; want an error mentioning %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
