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
	"time"

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
