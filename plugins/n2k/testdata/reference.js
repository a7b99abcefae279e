// Prints, one JSON delta a line, what canboatjs + n2k-signalk (signalk-server's NMEA 2000
// pair) make of the log on stdin. Lines are trimmed first: canboatjs recognises nothing in
// candump lines that begin with spaces. Run with NODE_PATH naming the node_modules the
// Makefile's n2k-reference target installs.
'use strict'
const { FromPgn } = require('@canboat/canboatjs')
const { N2kMapper } = require('@signalk/n2k-signalk')
const readline = require('readline')

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
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  line = line.trim()
  if (line) parser.parseString(line)
})
