// What every KafkaJS scenario shares: its options, a KafkaJS client whose log goes to stderr
// (stdout is the scenario's JSON answer), waiting on a condition with a deadline, and
// errors as JSON.
'use strict'

const { Kafka, logLevel, Partitioners } = require('kafkajs')

const LOG_LEVEL = process.env.KAFKAJS_LOG_LEVEL || 'WARN'

// Every ERROR the client logged, for the scenario's answer (a test can hold a run to none).
const loggedErrors = []

// `--name value` pairs from the command line; numbers stay strings (the caller converts).
function options(required) {
  const found = {}
  const args = process.argv.slice(2)
  for (let i = 0; i < args.length; i += 2) {
    if (!args[i].startsWith('--') || i + 1 >= args.length) {
      throw new Error(`expected --name value pairs, got ${JSON.stringify(args.slice(i))}`)
    }
    found[args[i].slice(2)] = args[i + 1]
  }
  for (const name of required) {
    if (!(name in found)) throw new Error(`--${name} is required`)
  }
  return found
}

function logCreator() {
  return ({ namespace, label, log }) => {
    const { timestamp, logger, message, ...fields } = log
    const line = { timestamp, level: label, namespace, message, ...fields }
    if (label === 'ERROR') loggedErrors.push(line)
    process.stderr.write(`${JSON.stringify(line)}\n`)
  }
}

// `security`: KafkaJS's `ssl` and `sasl` options, for a secured listener.
function kafka(bootstrap, clientId, security = {}) {
  return new Kafka({
    ...security,
    clientId,
    brokers: bootstrap.split(','),
    logLevel: logLevel[LOG_LEVEL.toUpperCase()],
    logCreator,
    // A test cluster answers at once; KafkaJS's 300 ms first backoff would only slow retries.
    retry: { initialRetryTime: 100, retries: 8 },
  })
}

// KafkaJS's default partitioner (murmur2 of the key, as Java's), noting in `chosen` the
// partition it picks for each key, so a send's base offsets give each record its offset.
function recordingPartitioner(chosen) {
  return () => {
    const partitioner = Partitioners.DefaultPartitioner()
    return args => {
      const partition = partitioner(args)
      chosen.set(args.message.key, partition)
      return partition
    }
  }
}

// Poll `predicate` every 20 ms until it holds; an error naming `what` after `timeoutMs`.
async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

// A KafkaJS error as the tests compare it: its class, its Kafka error type, its message,
// and those of the errors it aggregates.
function describeError(error) {
  const described = { name: error.name, type: error.type ?? null, message: error.message }
  if (error.retriable !== undefined) described.retriable = error.retriable
  if (error.topic !== undefined) described.topic = error.topic
  if (Array.isArray(error.errors)) described.errors = error.errors.map(describeError)
  if (error.cause) described.cause = describeError(error.cause)
  return described
}

// Headers as [name, value] pairs in the order of the record, as strings.
function headerPairs(headers) {
  const pairs = []
  for (const [name, value] of Object.entries(headers || {})) {
    for (const one of Array.isArray(value) ? value : [value]) {
      pairs.push([name, one === null || one === undefined ? null : one.toString()])
    }
  }
  return pairs
}

function text(buffer) {
  return buffer === null || buffer === undefined ? null : buffer.toString()
}

// Run a scenario: its answer is one JSON line on stdout; a failure is reported on stderr
// and exits 1.
function main(scenario) {
  scenario()
    .then(result => {
      process.stdout.write(`${JSON.stringify({ ...result, logged_errors: loggedErrors })}\n`)
      process.exit(0)
    })
    .catch(error => {
      process.stderr.write(`scenario failed: ${error.stack}\n${JSON.stringify(describeError(error))}\n`)
      process.exit(1)
    })
}

module.exports = { options, kafka, recordingPartitioner, waitFor, describeError, headerPairs, text, main, loggedErrors }
