// Prints, one JSON delta a line, what canboatjs + n2k-signalk (signalk-server's NMEA 2000
// pair) make of the log on stdin. Lines are trimmed first: canboatjs recognises nothing in
// candump lines that begin with spaces. Run with NODE_PATH naming the node_modules the
// Makefile's n2k-reference target installs. With --pgns it prints the PGNs n2k-signalk maps
// instead, as a JSON array.
'use strict'
const { FromPgn } = require('@canboat/canboatjs')
const { N2kMapper } = require('@signalk/n2k-signalk')
const readline = require('readline')
const path = require('path')

const parser = new FromPgn({})
const mapper = new N2kMapper({})
parser.on('error', () => {})
parser.on('warning', () => {})
parser.on('pgn', (pgn) => {
  const delta = mapper.toDelta(pgn)
  if (delta && delta.updates && delta.updates.some((u) => u.values && u.values.length)) {
    process.stdout.write(JSON.stringify(delta) + '\n')
  }
})
if (process.argv[2] === '--pgns') {
  // the PGNs n2k-signalk maps: its mapping modules, as its N2kMapper gathers them
  const dir = path.dirname(require.resolve('@signalk/n2k-signalk'))
  const pgns = {}
  for (const d of ['pgns', 'fusion', 'lowrance', 'raymarine', 'maretron', 'actisense', 'digitalyacht', 'simrad']) {
    Object.assign(pgns, require(path.join(dir, d)))
  }
  process.stdout.write(JSON.stringify(Object.keys(pgns).map(Number)) + '\n')
  process.exit(0)
}
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  line = line.trim()
  if (line) parser.parseString(line)
})
