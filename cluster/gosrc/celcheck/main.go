// Command celcheck compiles DRA device-selector CEL expressions exactly as the Kubernetes apiserver does.
//
// It reads JSON lines {"id": "...", "expression": "...", "path": "..."} on stdin and writes one JSON line
// {"id": "...", "ok": bool, "error": "...", "detail": "...", "cost": N} per input, in order. "path" is the
// field path to put in front of the message (for example
// "spec.devices.requests[0].exactly.selectors[0].cel.expression"); "error" is then the text kubectl would
// show, built with the same field.Error helpers as pkg/apis/resource/validation.validateCELSelector.
// A line that is not valid JSON gets {"ok": false, "error": "bad input: ..."} so the caller never hangs.
//
// With "devices" (each {"name", "driver", "attributes", "capacity"} in a ResourceSlice's own JSON shape), an
// expression that compiles is also evaluated against each device exactly as the scheduler's DRA allocator does
// (k8s.io/dynamic-resource-allocation/cel CompilationResult.DeviceMatches, stored-expression environment,
// runtime cost limit CELSelectorExpressionMaxCost), each evaluation bounded by -eval-timeout; the answer then
// holds "devices": [{"name", "match", "error"}] in the same order ("error" is the allocator's runtime error).
//
// With "mode": "parse" the expression is only parsed, by cel-go's own parser with the standard macros (has, all,
// exists, exists_one, map, filter) and optional syntax, and the answer holds "ast": the parsed expression as JSON
// (see astJSON). Nothing is type-checked; "ok" false and "error" carry the parser's message. The static checks
// of graders/cel_static.py read this tree instead of guessing at CEL's grammar.
//
// Flags select the feature gates that change the CEL environment; the defaults are those of Kubernetes
// v1.36 (DRAConsumableCapacity beta and on, DRAListTypeAttributes alpha and off).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/parser"

	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// The limits of resource.k8s.io/v1 (CELSelectorExpressionMaxLength, CELSelectorExpressionMaxCost).
const (
	maxLength = 10 * 1024
	maxCost   = 1000000
)

type request struct {
	ID         string     `json:"id"`
	Expression string     `json:"expression"`
	Path       string     `json:"path"`
	Stored     bool       `json:"stored"`
	Mode       string     `json:"mode,omitempty"`
	Devices    []deviceIn `json:"devices,omitempty"`
}

// deviceIn is a ResourceSlice device as the API serves it (attributes and capacity keep their JSON shape).
type deviceIn struct {
	Name                     string                                                    `json:"name"`
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations,omitempty"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity,omitempty"`
}

type deviceVerdict struct {
	Name  string `json:"name"`
	Match bool   `json:"match"`
	Error string `json:"error,omitempty"`
}

type response struct {
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Error   string          `json:"error,omitempty"`
	Detail  string          `json:"detail,omitempty"`
	Cost    uint64          `json:"cost"`
	Devices []deviceVerdict `json:"devices,omitempty"`
	AST     any             `json:"ast,omitempty"`
}

var evalTimeout = 2 * time.Second

func main() {
	consumable := flag.Bool("consumable-capacity", true, "enable the DRAConsumableCapacity CEL additions")
	listTypes := flag.Bool("list-type-attributes", false, "enable the DRAListTypeAttributes CEL additions")
	flag.DurationVar(&evalTimeout, "eval-timeout", evalTimeout, "the longest one device's evaluation may take")
	flag.Parse()
	compiler := dracel.GetCompiler(dracel.Features{
		EnableConsumableCapacity: *consumable,
		EnableListTypeAttributes: *listTypes,
	})

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		var resp response
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			resp = response{OK: false, Error: "bad input: " + err.Error()}
		} else if req.Mode == "parse" {
			resp = parse(req)
		} else if req.Mode != "" {
			resp = response{ID: req.ID, Error: "bad input: unknown mode " + strconv.Quote(req.Mode)}
		} else {
			resp = check(compiler, req)
		}
		if err := enc.Encode(resp); err != nil {
			fmt.Fprintln(os.Stderr, "celcheck: write:", err)
			os.Exit(2)
		}
		// Flush per line so a caller may also use the process interactively.
		if err := out.Flush(); err != nil {
			fmt.Fprintln(os.Stderr, "celcheck: flush:", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "celcheck: read:", err)
		os.Exit(2)
	}
}

type celCompiler interface {
	CompileCELExpression(expression string, options dracel.Options) dracel.CompilationResult
}

// check mirrors validateCELSelector in k8s.io/kubernetes/pkg/apis/resource/validation.
func check(compiler celCompiler, req request) response {
	path := field.NewPath("expression")
	if req.Path != "" {
		path = field.NewPath(req.Path)
	}
	resp := response{ID: req.ID}
	if len(req.Expression) > maxLength {
		e := field.TooLong(path, "", maxLength)
		resp.Error, resp.Detail = e.Error(), e.Detail
		return resp
	}
	envType := environment.NewExpressions
	if req.Stored {
		envType = environment.StoredExpressions
	}
	result := compiler.CompileCELExpression(req.Expression, dracel.Options{EnvType: &envType})
	resp.Cost = result.MaxCost
	if result.Error != nil {
		e := convert(path, req.Expression, result.Error)
		resp.Error, resp.Detail = e.Error(), result.Error.Detail
		return resp
	}
	if result.MaxCost > maxCost {
		e := field.Forbidden(path, "too complex, exceeds cost limit")
		resp.Error, resp.Detail = e.Error(), e.Detail
		return resp
	}
	resp.OK = true
	if len(req.Devices) > 0 {
		resp.Devices = evaluate(compiler, req)
	}
	return resp
}

// evaluate runs a compiled selector against each device as the allocator does (allocator_stable.go): the
// stored-expression environment, its runtime cost limit, and the allocator's "CEL runtime error" wording.
func evaluate(compiler celCompiler, req request) []deviceVerdict {
	result := compiler.CompileCELExpression(req.Expression, dracel.Options{})
	out := make([]deviceVerdict, 0, len(req.Devices))
	for _, d := range req.Devices {
		v := deviceVerdict{Name: d.Name}
		if result.Error != nil {
			v.Error = "CEL compile error: " + result.Error.Error()
			out = append(out, v)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), evalTimeout)
		matches, _, err := result.DeviceMatches(ctx, dracel.Device{Driver: d.Driver,
			AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
		cancel()
		if err != nil {
			v.Error = "CEL runtime error: " + err.Error()
		} else {
			v.Match = matches
		}
		out = append(out, v)
	}
	return out
}

// convert is convertCELErrorToValidationError from the apiserver's resource validation.
func convert(path *field.Path, expression string, err error) *field.Error {
	var celErr *apiservercel.Error
	if errors.As(err, &celErr) {
		switch celErr.Type {
		case apiservercel.ErrorTypeRequired:
			return field.Required(path, celErr.Detail)
		case apiservercel.ErrorTypeInvalid:
			return field.Invalid(path, expression, celErr.Detail)
		case apiservercel.ErrorTypeInternal:
			return field.InternalError(path, celErr)
		}
	}
	return field.InternalError(path, fmt.Errorf("unsupported error type: %w", err))
}

// The parser parse mode uses: cel-go's defaults (recursion depth 250, 30 error recoveries) bound the work a
// hostile expression can cause; the size limit is the API's own.
var celParser = func() *parser.Parser {
	p, err := parser.NewParser(parser.Macros(parser.AllMacros...), parser.EnableOptionalSyntax(true),
		parser.ExpressionSizeCodePointLimit(maxLength))
	if err != nil {
		panic(err)
	}
	return p
}()

// maxTreeDepth keeps the JSON tree shallow enough for any JSON reader (Python's stops near 1000 levels; each
// AST level is at most two JSON levels).
const maxTreeDepth = 200

// depth is the deepest path below e (cel-go's recursion limit already bounds it).
func depth(e ast.Expr, d int) int {
	deepest := d
	visit := func(x ast.Expr) {
		if got := depth(x, d+1); got > deepest {
			deepest = got
		}
	}
	switch e.Kind() {
	case ast.SelectKind:
		visit(e.AsSelect().Operand())
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			visit(c.Target())
		}
		for _, a := range c.Args() {
			visit(a)
		}
	case ast.ListKind:
		for _, a := range e.AsList().Elements() {
			visit(a)
		}
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			visit(entry.AsMapEntry().Key())
			visit(entry.AsMapEntry().Value())
		}
	case ast.StructKind:
		for _, entry := range e.AsStruct().Fields() {
			visit(entry.AsStructField().Value())
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		for _, a := range []ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
			visit(a)
		}
	}
	return deepest
}

// parse answers a "mode": "parse" request with the expression's syntax tree.
func parse(req request) response {
	resp := response{ID: req.ID}
	if len(req.Expression) > maxLength {
		resp.Error = fmt.Sprintf("expression too long: %d bytes, the limit is %d", len(req.Expression), maxLength)
		return resp
	}
	tree, errs := celParser.Parse(common.NewTextSource(req.Expression))
	if errs != nil && len(errs.GetErrors()) > 0 {
		resp.Error = errs.ToDisplayString()
		return resp
	}
	if d := depth(tree.Expr(), 0); d > maxTreeDepth {
		resp.Error = fmt.Sprintf("expression nests %d levels deep, more than the %d this analysis reads", d, maxTreeDepth)
		return resp
	}
	resp.OK = true
	resp.AST = astJSON(tree.Expr())
	return resp
}

// astJSON renders one node of cel-go's AST as JSON, one key naming its kind:
//
//	{"ident": "device"}
//	{"lit": "string"|"int"|"uint"|"double"|"bool"|"bytes"|"null_type", "value": "..."}
//	{"select": "attributes", "operand": node, "test": true}   (test: the has() macro's presence test)
//	{"call": "_==_", "args": [node...], "target": node}         (target only on a member call such as x.compareTo(y))
//	{"list": [node...]}  {"map": [{"key": node, "value": node}...]}  {"struct": "T", "fields": [{"field", "value"}]}
//	{"comprehension": {"iter_var", "iter_var2", "accu_var", "range", "init", "condition", "step", "result"}}
//
// Operators are calls with cel-go's internal names (_==_, _&&_, _[_], ...); macros arrive expanded.
func astJSON(e ast.Expr) map[string]any {
	switch e.Kind() {
	case ast.IdentKind:
		return map[string]any{"ident": e.AsIdent()}
	case ast.LiteralKind:
		return literalJSON(e.AsLiteral())
	case ast.SelectKind:
		s := e.AsSelect()
		n := map[string]any{"select": s.FieldName(), "operand": astJSON(s.Operand())}
		if s.IsTestOnly() {
			n["test"] = true
		}
		return n
	case ast.CallKind:
		c := e.AsCall()
		n := map[string]any{"call": c.FunctionName(), "args": listJSON(c.Args())}
		if c.IsMemberFunction() {
			n["target"] = astJSON(c.Target())
		}
		return n
	case ast.ListKind:
		return map[string]any{"list": listJSON(e.AsList().Elements())}
	case ast.MapKind:
		entries := []map[string]any{}
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			entries = append(entries, map[string]any{"key": astJSON(me.Key()), "value": astJSON(me.Value())})
		}
		return map[string]any{"map": entries}
	case ast.StructKind:
		s := e.AsStruct()
		fields := []map[string]any{}
		for _, entry := range s.Fields() {
			f := entry.AsStructField()
			fields = append(fields, map[string]any{"field": f.Name(), "value": astJSON(f.Value())})
		}
		return map[string]any{"struct": s.TypeName(), "fields": fields}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		return map[string]any{"comprehension": map[string]any{
			"iter_var": c.IterVar(), "iter_var2": c.IterVar2(), "accu_var": c.AccuVar(),
			"range": astJSON(c.IterRange()), "init": astJSON(c.AccuInit()), "condition": astJSON(c.LoopCondition()),
			"step": astJSON(c.LoopStep()), "result": astJSON(c.Result()),
		}}
	}
	return map[string]any{"unspecified": true}
}

func listJSON(exprs []ast.Expr) []map[string]any {
	out := make([]map[string]any, 0, len(exprs))
	for _, x := range exprs {
		out = append(out, astJSON(x))
	}
	return out
}

func literalJSON(v ref.Val) map[string]any {
	kind := v.Type().TypeName()
	var text string
	switch lit := v.(type) {
	case types.String:
		text = string(lit)
	case types.Bytes:
		text = string(lit)
	case types.Int:
		text = strconv.FormatInt(int64(lit), 10)
	case types.Uint:
		text = strconv.FormatUint(uint64(lit), 10)
	case types.Double:
		text = strconv.FormatFloat(float64(lit), 'g', -1, 64)
	case types.Bool:
		text = strconv.FormatBool(bool(lit))
	default:
		text = fmt.Sprint(v.Value())
	}
	return map[string]any{"lit": kind, "value": text}
}
