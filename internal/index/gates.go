package index

import "github.com/podsieve/podsieve/internal/engine"

// gate is one key of an exception of a flat keyed (not indexed), held in
// the keyed itself: a lookup passes over an exception none of whose gates
// admits the object without loading it. An exception is cold memory among
// thousands, and reading a namespace's dozen to find the one that matches
// costs a cache miss or more each. A gate errs towards admitting (only its
// first bytes are compared); SelectExceptions decides.
type gate struct {
	// lit is the first bytes of a name the exception's match.names pins
	// exactly (exact) or of a glob's literal prefix; n is its whole length.
	lit   [gateBytes]byte
	n     uint16
	exact bool
	open  bool // pins no name: kinds says which kinds it admits
	kinds uint16
	// i is the exception's place in rest.
	i int32
}

const gateBytes = 20

// maxGates bounds the gates of one exception in one list (32 bytes each;
// an exception may pin 16 names, in each of the 8 policies it names): most
// pin one or two.
const maxGates = 4

// allKinds admits every kind, including kinds podsieve does not evaluate.
const allKinds = ^uint16(0)

// appendGates appends the gates of e, the i-th exception of rest: one per
// name or prefix a pinned exception keys on (engine.Exception.MatchKeys),
// else one open gate that admits the kinds match.kinds names (every kind
// without it).
func appendGates(gates []gate, e *engine.Exception, i int) []gate {
	names, prefixes, kinds, pinned := e.MatchKeys()
	if pinned && len(names)+len(prefixes) > maxGates {
		// Many keys: one open gate, and Matches judges the name.
		pinned, kinds = false, nil
	}
	if !pinned {
		g := gate{open: true, kinds: allKinds, i: int32(i)}
		if len(kinds) > 0 {
			g.kinds = 0
			for _, k := range kinds {
				g.kinds |= kindBit(k)
			}
		}
		return append(gates, g)
	}
	for _, lit := range names {
		gates = append(gates, litGate(lit, true, i))
	}
	for _, lit := range prefixes {
		gates = append(gates, litGate(lit, false, i))
	}
	return gates
}

// gatesWith are gates (of rest) with e's inserted as the i-th exception of
// rest: the other exceptions' gates are kept, not read again from them
// (a frozen exception is compiled again to be read).
func gatesWith(gates []gate, e *engine.Exception, i int) []gate {
	at := len(gates)
	for j := range gates {
		if int(gates[j].i) >= i {
			at = j
			break
		}
	}
	out := make([]gate, 0, len(gates)+1)
	out = append(out, gates[:at]...)
	out = appendGates(out, e, i)
	for _, g := range gates[at:] {
		g.i++
		out = append(out, g)
	}
	return out
}

// gatesWithout are gates (of rest) without those of the i-th exception of
// rest, which leaves it.
func gatesWithout(gates []gate, i int) []gate {
	out := make([]gate, 0, len(gates))
	for _, g := range gates {
		switch {
		case int(g.i) == i:
			continue
		case int(g.i) > i:
			g.i--
		}
		out = append(out, g)
	}
	return out
}

func litGate(lit string, exact bool, i int) gate {
	if len(lit) >= 1<<16 {
		return gate{open: true, kinds: allKinds, i: int32(i)} // longer than any name
	}
	g := gate{n: uint16(len(lit)), exact: exact, i: int32(i)}
	copy(g.lit[:], lit)
	return g
}

// kindBit is a kind's bit in gate.kinds: one per pod-bearing kind, and the
// rest for any other.
func kindBit(kind string) uint16 {
	for i, k := range engine.PodBearingKinds {
		if string(k.Kind) == kind {
			return 1 << i
		}
	}
	return 1 << 15
}

// admits reports whether the gate lets an object of this name and kind
// (kindBit) by.
func (g *gate) admits(name string, kind uint16) bool {
	if g.open {
		return g.kinds&kind != 0
	}
	n := int(g.n)
	if n > len(name) || g.exact && n != len(name) {
		return false
	}
	m := min(n, gateBytes)
	return string(g.lit[:m]) == name[:m]
}
