// Command celcheck compiles DRA device-selector CEL expressions exactly as the Kubernetes apiserver does.
//
// It reads JSON lines {"id": "...", "expression": "...", "path": "..."} on stdin and writes one JSON line
// {"id": "...", "ok": bool, "error": "...", "detail": "...", "cost": N} per input, in order. "path" is the
// field path to put in front of the message (for example
// "spec.devices.requests[0].exactly.selectors[0].cel.expression"); "error" is then the text kubectl would
// show, built with the same field.Error helpers as pkg/apis/resource/validation.validateCELSelector.
// A line that is not valid JSON gets {"ok": false, "error": "bad input: ..."} so the caller never hangs.
//
// Flags select the feature gates that change the CEL environment; the defaults are those of Kubernetes
// v1.36 (DRAConsumableCapacity beta and on, DRAListTypeAttributes alpha and off).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

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
	ID         string `json:"id"`
	Expression string `json:"expression"`
	Path       string `json:"path"`
	Stored     bool   `json:"stored"`
}

type response struct {
	ID     string `json:"id"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
	Cost   uint64 `json:"cost"`
}

func main() {
	consumable := flag.Bool("consumable-capacity", true, "enable the DRAConsumableCapacity CEL additions")
	listTypes := flag.Bool("list-type-attributes", false, "enable the DRAListTypeAttributes CEL additions")
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
	return resp
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
