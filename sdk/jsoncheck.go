package sdk

// quickJSON reports whether b is certainly a JSON text that a composite value may be: well
// formed as encoding/json.Valid judges it, made of ASCII only (so UTF-8 too), nested at
// most 64 deep. It answers false for everything else, malformed or merely outside that
// (text past ASCII, deeper nesting), and the caller then checks the long way, with
// encoding/json, which also words the error: a false answer costs time, never a different
// outcome.
//
// It exists for speed inside the sandbox: encoding/json's scanner calls a state function
// per byte, and in Go's WebAssembly code every such indirect call is dear; validating
// the composite values (positions, attitudes) cost a plugin publishing them about as much
// as encoding them. Here a byte is a switch.
func quickJSON(b []byte) bool {
	// stack holds one bit per open container, 1 for an object; depth counts them.
	var stack uint64
	depth := 0
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth == 64 {
				return false
			}
			stack = stack<<1 | uint64(c>>5&1) // '{' is 0x7b, '[' is 0x5b: bit 5 tells them apart
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' or ']' right away: empty
				stack >>= 1
				depth--
				i++
				break
			}
			if c == '{' {
				if i = quickString(b, i); i < 0 {
					return false
				}
				if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
					return false
				}
				i = skipSpace(b, i+1)
			}
			continue
		case c == '"':
			i = quickString(b, i)
		case c == '-' || c >= '0' && c <= '9':
			i = quickNumber(b, i)
		case c == 't':
			i = literal(b, i, "true")
		case c == 'f':
			i = literal(b, i, "false")
		case c == 'n':
			i = literal(b, i, "null")
		default:
			return false
		}
		if i < 0 {
			return false
		}
		// A value ended before i: what follows closes containers or starts the next member.
		for {
			i = skipSpace(b, i)
			if depth == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			object := stack&1 == 1
			switch {
			case b[i] == ',':
				i = skipSpace(b, i+1)
				if object {
					if i = quickString(b, i); i < 0 {
						return false
					}
					if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
						return false
					}
					i = skipSpace(b, i+1)
				}
			case object && b[i] == '}' || !object && b[i] == ']':
				stack >>= 1
				depth--
				i++
				continue
			default:
				return false
			}
			break
		}
	}
}

// skipSpace answers the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// quickString answers the index after the ASCII string starting at i, or -1.
func quickString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20 || c >= 0x80:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// quickNumber answers the index after the JSON number starting at i, or -1.
func quickNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// literal answers the index after word at i, or -1.
func literal(b []byte, i int, word string) int {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}
