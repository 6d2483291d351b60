package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Glob is a compiled glob. The dialect is podsieve's everywhere the API takes
// globs:
//
//   - any run of characters within one "/"-separated segment
//     **  any run of characters, across segments
//     ?   one character other than "/"
//
// A glob that is exactly "*" matches every string, because that is what a
// person writing `images: ["*"]` means. Keeping "*" inside one segment is what
// stops `registry.io/team*` from matching `registry.io/team-evil/app`.
// Character classes and escapes ([, ], \) are reserved and refused. A run of
// stars is one "**".
//
// A Glob keeps the pattern as written and a few lengths (about 32 bytes
// besides the string): the automaton that matches it is built for each match
// from the pattern, in time linear in its length, and a match costs
// O(len(subject) × ⌈positions/64⌉) word operations, never more, whatever the
// pattern and subject (FuzzGlob checks it).
type Glob struct {
	raw  string
	kind globKind
	// star is the tail of a glob whose only wildcard after its literal
	// prefix is one run of stars ("registry.example/team-*"): 1 for "*",
	// 2 for "**", 0 otherwise. Such globs need no automaton.
	star   uint8
	prefix uint16 // bytes of literal text before the first wildcard
	suffix uint16 // bytes of literal text after the last wildcard
	// npos is the number of positions after the prefix: literal bytes and
	// "?"s, the automaton's states besides its start. A match needs at least
	// npos bytes after the prefix.
	npos uint16
	// ncls is the number of distinct literal bytes after the prefix: the
	// automaton's byte classes besides the two default ones.
	ncls uint8
}

type globKind uint8

const (
	globWild globKind = iota
	globAny
	globLiteral
)

// MaxGlobLength bounds a glob, in bytes. The API's schema allows far less
// (256 for images and values, 253 for names); the bound is defence in depth
// for globs that reach the engine by another way (files given to the CLI): a
// match costs up to ⌈(MaxGlobLength+1)/64⌉ = 17 word operations per byte of its
// subject.
const MaxGlobLength = 1024

// CompileGlob parses a glob; the error says what is wrong with it.
//
// Globs are matched by a small bit-parallel automaton instead of a regular
// expression: a compiled regexp costs about 2 KiB, which is most of an
// exception's memory when a cluster holds 100,000 of them.
func CompileGlob(s string) (Glob, error) {
	switch {
	case s == "":
		return Glob{}, fmt.Errorf("empty glob: write a name, or \"*\" for any")
	case len(s) > MaxGlobLength:
		return Glob{}, fmt.Errorf("glob %.32q... is %d bytes long; a glob may have at most %d", s, len(s), MaxGlobLength)
	case strings.ContainsAny(s, `[]\`):
		return Glob{}, fmt.Errorf("glob %q: only *, ** and ? are special; character classes and escapes ([, ], \\) are not supported", s)
	case !utf8.ValidString(s):
		return Glob{}, fmt.Errorf("glob %q: not valid UTF-8", s)
	case s == "*":
		return Glob{raw: s, kind: globAny}, nil
	case !strings.ContainsAny(s, "*?"):
		return Glob{raw: s, kind: globLiteral}, nil
	}
	g := Glob{raw: s, kind: globWild}
	prefix := strings.IndexAny(s, "*?")
	g.prefix = uint16(prefix)
	g.suffix = uint16(len(s) - 1 - strings.LastIndexAny(s, "*?"))
	rest := s[prefix:]
	if strings.Trim(rest, "*") == "" {
		g.star = 1
		if len(rest) > 1 {
			g.star = 2
		}
	}
	var seen [256]bool
	for i := 0; i < len(rest); i++ {
		switch b := rest[i]; b {
		case '*':
		case '?':
			g.npos++
		default:
			g.npos++
			if !seen[b] {
				seen[b] = true
				g.ncls++ // at most 238: the bytes valid UTF-8 holds, but for *, ?, [, ] and \
			}
		}
	}
	return g, nil
}

// Match reports whether s matches the glob. A string that is not valid UTF-8
// (which nothing decoded from the API is) matches only "*": a byte that is not
// part of a character could otherwise be read as one.
func (g Glob) Match(s string) bool {
	switch {
	case g.kind == globAny:
		return true
	case g.kind == globLiteral:
		// A literal is valid UTF-8, so equality needs no check of s.
		return g.raw == s
	case !utf8.ValidString(s):
		return false
	}
	var buf [48]uint64
	var sc globScratch
	sc.masks = buf[:0]
	_, ok, _ := g.match(s, -1, &sc)
	return ok
}

// globScratch is what the automaton needs while it runs: a class per byte
// value and the bit masks. One is reused across the matches of a decision.
type globScratch struct {
	automaton
	// keep is set for a decision's scratch: built then keeps the automata
	// of long globs for the rest of the decision, so that a glob's
	// automaton is built once, not once per image. At most maxBuiltWords of
	// masks are kept.
	keep       bool
	built      map[*Glob]*automaton
	builtWords int
}

// automaton is a glob's automaton after its literal prefix, as built for
// matching (run).
type automaton struct {
	cls        [256]uint8 // class per byte value
	masks      []uint64   // L per byte kind, then B per class; w words each
	w          int
	startLoops [3]bool // whether the start state loops, per byte kind
	npos       int
}

// maxBuiltWords bounds what a decision keeps of built automata: 256 KiB.
const maxBuiltWords = 32 << 10

// Byte kinds: what the automaton's loops and "?" do with a byte of the
// subject. Subjects are valid UTF-8, so a continuation byte always follows the
// start of its character.
const (
	kindChar = iota // starts a character other than "/"
	kindSlash
	kindCont // continues a multi-byte character
)

var (
	byteKind     [256]uint8 // kindChar, kindSlash or kindCont
	defaultClass [256]uint8 // class 0 (bytes "?" takes) or 1 (bytes it does not)
)

func init() {
	for b := range 256 {
		switch {
		case b == '/':
			byteKind[b], defaultClass[b] = kindSlash, 1
		case b >= 0x80 && b < 0xC0:
			byteKind[b], defaultClass[b] = kindCont, 1
		}
	}
}

// match reports whether the glob matches s[:cut] (when cut >= 0) and s, in
// one pass over s: an image's repository name is a prefix of its reference.
// s must be valid UTF-8 and cut at a character boundary (0 <= cut <= len(s)).
// steps is the work done, what a decision's budget is charged: the
// automaton's word operations to build it and (w+1) per byte of s, plus
// globCallSteps. It is at most
// globCallSteps + len(pattern) + (2×len(pattern) + 10)×w + len(s)×(w+1),
// where w is the automaton's words (words; FuzzGlob checks it).
func (g *Glob) match(s string, cut int, sc *globScratch) (atCut, atEnd bool, steps int64) {
	switch g.kind {
	case globAny:
		return cut >= 0, true, globCallSteps
	case globLiteral:
		return cut >= 0 && s[:cut] == g.raw, s == g.raw, globCallSteps
	}
	endOK := g.mayMatch(s)
	cutOK := cut >= 0 && g.mayMatch(s[:cut])
	switch {
	case !endOK && !cutOK:
		return false, false, globCallSteps
	case !endOK:
		// Only the shorter subject is left to test: its answer is the
		// answer at cut.
		_, atCut, steps = g.match(s[:cut], -1, sc)
		return atCut, false, steps
	case !cutOK:
		cut = -1
	}
	p := int(g.prefix)
	if g.star == 2 {
		return cut >= 0, true, globCallSteps
	}
	if g.star == 1 {
		// One segment after the prefix: the longer subject has no "/" there
		// iff neither has.
		slash := strings.IndexByte(s[p:], '/')
		return cut >= 0 && (slash < 0 || slash >= cut-p), slash < 0, globCallSteps + int64(len(s)-p)/8
	}
	if cut >= 0 {
		cut -= p
	}
	return g.run(s[p:], cut, sc)
}

// mayMatch tests what a match needs besides the automaton: the literal prefix
// and suffix, and enough bytes for every position.
func (g *Glob) mayMatch(s string) bool {
	return len(s) >= int(g.prefix)+int(g.npos) &&
		s[:g.prefix] == g.raw[:g.prefix] &&
		s[len(s)-int(g.suffix):] == g.raw[len(g.raw)-int(g.suffix):]
}

// run is the automaton after the literal prefix, a bit-parallel Glushkov
// automaton (Shift-And with loops): bit j of d is "the first j positions of
// the rest of the glob are matched", bit 0 the start state. Per byte c of s:
//
//	d = ((d << 1) & B[c]) | (d & L[kind of c])
//
// B[c] has the positions that accept c (the literal byte c, or a "?" when c
// starts a character other than "/"); L has the states that loop on a star
// ("**" on any byte, "*" on any but "/"), and, on a continuation byte, the
// states right after a "?", which takes a whole character. No state needs an
// epsilon move: a star is a loop on the state before the next position.
func (g *Glob) run(s string, cut int, sc *globScratch) (atCut, atEnd bool, steps int64) {
	a := &sc.automaton
	if sc.keep && len(g.raw)-int(g.prefix) >= 64 {
		if b := sc.built[g]; b != nil {
			a = b
		} else {
			steps += a.build(g)
			if need := len(a.masks); sc.builtWords+need <= maxBuiltWords {
				if sc.built == nil {
					sc.built = map[*Glob]*automaton{}
				}
				b := &automaton{cls: a.cls, masks: slices.Clone(a.masks), w: a.w, startLoops: a.startLoops, npos: a.npos}
				sc.built[g] = b
				sc.builtWords += need
				a = b
			}
		}
	} else {
		steps += a.build(g)
	}
	n, atCut, atEnd := a.run(s, cut)
	return atCut, atEnd, steps + globCallSteps + n
}

// build makes the glob's automaton, and returns its cost in steps.
func (a *automaton) build(g *Glob) (steps int64) {
	rest := g.raw[g.prefix:]
	w := g.words()
	need := (5 + int(g.ncls)) * w
	if cap(a.masks) < need {
		a.masks = make([]uint64, need)
	}
	a.masks = a.masks[:need]
	masks := a.masks
	clear(masks)
	a.cls = defaultClass
	a.w, a.npos = w, int(g.npos)
	steps = int64(len(rest)) + 2*int64(need) // build, clear and the "?" pass
	// masks holds L for each byte kind, then B for each class: class 0 is the
	// bytes only a "?" takes, class 1 the bytes nothing but a loop takes, and
	// each literal byte has its own. Bit 0 is the start state; bit j is the
	// state after j positions.
	loops, classes := masks[:3*w], masks[3*w:]
	var literals [256]byte // the byte of each class from 2 on
	next := uint8(2)
	pos := 0
	for i := 0; i < len(rest); i++ {
		b := rest[i]
		if b == '*' {
			double := i+1 < len(rest) && rest[i+1] == '*'
			for i+1 < len(rest) && rest[i+1] == '*' {
				i++
			}
			word, bit := pos/64, uint64(1)<<(pos%64)
			loops[kindChar*w+word] |= bit
			loops[kindCont*w+word] |= bit
			if double {
				loops[kindSlash*w+word] |= bit
			}
			continue
		}
		pos++
		word, bit := pos/64, uint64(1)<<(pos%64)
		if b == '?' {
			classes[word] |= bit          // class 0
			loops[kindCont*w+word] |= bit // the rest of its character
			continue
		}
		c := a.cls[b]
		if c < 2 {
			c = next
			a.cls[b] = c
			literals[c] = b
			next++
		}
		classes[int(c)*w+word] |= bit
	}
	// A "?" also takes a literal byte that starts a character other than
	// "/": its class gets class 0's positions.
	for c := 2; c < int(next); c++ {
		if byteKind[literals[c]] == kindChar {
			for j := range w {
				classes[c*w+j] |= classes[j]
			}
		}
	}
	return steps
}

// run runs the automaton on s (after the glob's literal prefix), and
// returns its cost in steps, and whether it accepted s[:cut] and s. A byte
// costs w+1 steps: the words, and the loads and loop around them, which cost
// about one word's worth (BenchmarkGlobBytes).
func (a *automaton) run(s string, cut int) (steps int64, atCut, atEnd bool) {
	w := a.w
	lastWord, lastBit := a.npos/64, uint64(1)<<(a.npos%64)
	end := len(s)
	if cut >= 0 {
		end = cut
	}
	switch w {
	case 1:
		// Most globs: one word.
		d, n := a.run1(1, s[:end])
		if cut >= 0 && n == end {
			atCut = d&lastBit != 0
			var m int
			d, m = a.run1(d, s[cut:])
			n += m
		}
		return int64(n) * 2, atCut, n == len(s) && d&lastBit != 0
	case 4:
		// Globs of 64 to 255 positions, which is every glob the API admits
		// but the short ones: four words, unrolled.
		d, n := a.run4([4]uint64{1}, s[:end])
		if cut >= 0 && n == end {
			atCut = d[lastWord]&lastBit != 0
			var m int
			d, m = a.run4(d, s[cut:])
			n += m
		}
		return int64(n) * 5, atCut, n == len(s) && d[lastWord]&lastBit != 0
	}
	var dbuf [(MaxGlobLength + 64) / 64]uint64
	d := dbuf[:w]
	d[0] = 1
	loops, classes := a.masks[:3*w], a.masks[3*w:]
	for i := 0; i < len(s); i++ {
		if i == cut {
			atCut = d[lastWord]&lastBit != 0
		}
		c := s[i]
		b := classes[int(a.cls[c])*w:][:w]
		l := loops[int(byteKind[c])*w:][:w]
		carry, alive := uint64(0), uint64(0)
		for j := range d {
			dj := d[j]
			nd := (dj<<1|carry)&b[j] | dj&l[j]
			carry = dj >> 63
			d[j] = nd
			alive |= nd
		}
		if alive == 0 {
			return int64(i+1) * int64(w+1), atCut, false
		}
	}
	return int64(len(s)) * int64(w+1), atCut, d[lastWord]&lastBit != 0
}

// run1 runs a one-word automaton from d over s, until s ends or no state is
// left, and returns the states and the bytes read.
func (a *automaton) run1(d uint64, s string) (uint64, int) {
	l := [3]uint64{a.masks[0], a.masks[1], a.masks[2]}
	classes := a.masks[3:]
	for i := 0; i < len(s); i++ {
		c := s[i]
		d = d<<1&classes[a.cls[c]] | d&l[byteKind[c]&3]
		if d == 0 {
			return 0, i + 1
		}
	}
	return d, len(s)
}

// run4 is run1 for four words. It slices the masks so that each byte costs
// one bounds check per table rather than a slice and its conversion: this
// loop is most of what a decision's image globs cost
// (BenchmarkGlobBytes/words=4, BenchmarkWorstCase/largest-exception-largest-pod).
func (a *automaton) run4(d [4]uint64, s string) ([4]uint64, int) {
	m := a.masks
	loops := (*[12]uint64)(m[:12])
	cls := &a.cls
	d0, d1, d2, d3 := d[0], d[1], d[2], d[3]
	for i := 0; i < len(s); i++ {
		c := s[i]
		k := 12 + int(cls[c])*4
		b := (*[4]uint64)(m[k : k+4])
		k = int(byteKind[c]&3) * 4
		l := (*[4]uint64)(loops[k : k+4])
		d0, d1, d2, d3 = d0<<1&b[0]|d0&l[0], (d1<<1|d0>>63)&b[1]|d1&l[1],
			(d2<<1|d1>>63)&b[2]|d2&l[2], (d3<<1|d2>>63)&b[3]|d3&l[3]
		if d0|d1|d2|d3 == 0 {
			return [4]uint64{}, i + 1
		}
	}
	return [4]uint64{d0, d1, d2, d3}, len(s)
}

// words is the number of 64-bit words the automaton works on, for its start
// state and positions: one for up to 63 positions, four (unrolled) for up to
// 255, ⌈(npos+1)/64⌉ beyond.
func (g *Glob) words() int {
	switch w := (int(g.npos) + 64) / 64; {
	case w <= 1:
		return 1
	case w <= 4:
		return 4
	default:
		return w
	}
}

// globCallSteps is the cost of one call besides the automaton's words: the
// literal prefix and suffix tests and the call itself.
const globCallSteps = 8

// String is the glob as written.
func (g Glob) String() string { return g.raw }

// Globs is a list of globs that matches when any of them does.
type Globs []Glob

// CompileGlobs compiles every glob; the error names the first bad one by index.
func CompileGlobs(ss []string) (Globs, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	gs := make(Globs, 0, len(ss))
	for i, s := range ss {
		g, err := CompileGlob(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// Match reports whether any glob matches s.
func (gs Globs) Match(s string) bool {
	// Most lists are literals (rule names, container names): compare them
	// before setting up an automaton.
	wild := false
	for i := range gs {
		switch gs[i].kind {
		case globAny:
			return true
		case globLiteral:
			if gs[i].raw == s {
				return true
			}
		default:
			wild = true
		}
	}
	if !wild {
		return false
	}
	var buf [48]uint64
	var sc globScratch
	sc.masks = buf[:0]
	ok, _ := gs.matchCounted(s, &sc)
	return ok
}

// matchCounted is Match with the work done, for a decision's budget.
func (gs Globs) matchCounted(s string, sc *globScratch) (bool, int64) {
	if len(gs) == 0 {
		return false, 0
	}
	if gs[0].kind == globAny {
		return true, globCallSteps
	}
	valid := utf8.ValidString(s)
	var steps int64
	for i := range gs {
		g := &gs[i]
		if g.kind == globAny {
			return true, steps + globCallSteps
		}
		if !valid {
			continue
		}
		_, ok, n := g.match(s, -1, sc)
		steps += n
		if ok {
			return true, steps
		}
	}
	return false, steps
}

// Patterns are the globs as written.
func (gs Globs) Patterns() []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.raw
	}
	return out
}

// GlobRegexp is the RE2 regular expression, anchored at both ends, that
// matches exactly the strings the glob matches: "*" within a "/"-separated
// segment, "**" (two or more stars) across segments, "?" one character other
// than "/", everything else literally. It is the glob in a form other
// engines evaluate (the CEL of ValidatingAdmissionPolicies);
// TestGlobRegexpMatchesAsGlob and FuzzGlobRegexp hold the two equal. The
// glob must compile (CompileGlob); a glob that is exactly "*" matches every
// string.
func GlobRegexp(glob string) (string, error) {
	if _, err := CompileGlob(glob); err != nil {
		return "", err
	}
	if glob == "*" {
		return `^(?s:.*)$`, nil
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(glob); {
		switch glob[i] {
		case '*':
			j := i
			for j < len(glob) && glob[j] == '*' {
				j++
			}
			if j-i > 1 {
				b.WriteString(`.*`)
			} else {
				b.WriteString(`[^/]*`)
			}
			i = j
		case '?':
			b.WriteString(`[^/]`)
			i++
		default:
			_, size := utf8.DecodeRuneInString(glob[i:])
			b.WriteString(regexp.QuoteMeta(glob[i : i+size]))
			i += size
		}
	}
	b.WriteString(`)$`)
	return b.String(), nil
}
