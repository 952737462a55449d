// KafkaJS over an SSL or SASL_SSL listener (issue 47). `--ca` the CA's certificate (PEM);
// `--keystore` a PEM file with the client's key and certificate chain (mutual TLS); or
// `--mechanism` plain|scram-sha-256|scram-sha-512 with `--username` and `--password`.
// `--scenario round-trip`: an idempotent producer sends --count records to --topic and a
// group consumer reads them back. `--scenario refused`: connecting with credentials the
// broker refuses; prints the error and how long it took.
'use strict'

const fs = require('fs')
const { options, kafka, waitFor, describeError, main } = require('./common')

function security(opts) {
  const ssl = { ca: [fs.readFileSync(opts.ca, 'utf8')] }
  if (opts.keystore) {
    // The key and the chain are in one PEM file: Node takes each from it.
    const keystore = fs.readFileSync(opts.keystore, 'utf8')
    Object.assign(ssl, { key: keystore, cert: keystore })
  }
  const found = { ssl }
  if (opts.mechanism) {
    found.sasl = { mechanism: opts.mechanism, username: opts.username, password: opts.password }
  }
  return found
}

async function roundTrip(opts) {
  const count = Number(opts.count)
  const client = kafka(opts.bootstrap, 'kafkajs-secured', security(opts))
  const producer = client.producer({ idempotent: true })
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) messages.push({ key: `key-${i}`, value: `value-${i}` })
  const sent = await producer.send({ topic: opts.topic, acks: -1, messages })
  await producer.disconnect()

  const consumer = client.consumer({ groupId: `kafkajs-secured-${opts.topic}` })
  const values = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [opts.topic], fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => values.push(message.value.toString()) })
    await waitFor(() => values.length >= count, 30000, `${count} records of ${opts.topic}`)
  } finally {
    await consumer.disconnect()
  }
  return { base_offsets: sent.map(m => m.baseOffset), values }
}

async function refused(opts) {
  const producer = kafka(opts.bootstrap, 'kafkajs-refused', security(opts)).producer()
  const start = process.hrtime.bigint()
  let error = null
  try {
    await producer.connect()
  } catch (e) {
    error = describeError(e)
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  await producer.disconnect()
  return { error, seconds }
}

main(async () => {
  const opts = options(['bootstrap', 'ca', 'scenario'])
  if (opts.scenario === 'round-trip') return roundTrip(opts)
  if (opts.scenario === 'refused') return refused(opts)
  throw new Error(`unknown --scenario ${opts.scenario}: round-trip or refused`)
})
