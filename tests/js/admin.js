// KafkaJS's admin client against Purgatory: creates --topic (replication factor 3, a
// retention.ms of its own), then reads it back (fetchTopicMetadata, listTopics,
// describeCluster, fetchTopicOffsets after 5 records to partition 0), reads the offsets a
// consumer of --group committed (fetchOffsets), deletes the topic; and the errors of
// creating a topic that exists, of an impossible replication factor, of reading and
// deleting a topic that does not exist, each as KafkaJS reports it.
'use strict'

const { Partitioners } = require('kafkajs')
const { options, kafka, waitFor, describeError, main } = require('./common')

const TIMEOUT_MS = 30000

main(async () => {
  const opts = options(['bootstrap', 'topic', 'group', 'partitions', 'missing-topic'])
  const { topic, group } = opts
  const missing = opts['missing-topic']
  const partitions = Number(opts.partitions)
  const client = kafka(opts.bootstrap, 'kafkajs-admin')
  const admin = client.admin()
  await admin.connect()
  const errors = []
  async function expectError(operation, call) {
    try {
      const returned = await call()
      errors.push({ operation, returned: returned === undefined ? null : returned })
    } catch (error) {
      errors.push({ operation, error: describeError(error) })
    }
  }

  const created = await admin.createTopics({
    topics: [
      {
        topic,
        numPartitions: partitions,
        replicationFactor: 3,
        configEntries: [{ name: 'retention.ms', value: '3600000' }],
      },
    ],
    waitForLeaders: true,
  })
  // KafkaJS answers false when every topic asked for exists (TOPIC_ALREADY_EXISTS).
  const createdAgain = await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 3 }],
  })
  // With another error beside it, KafkaJS throws every topic's error.
  await expectError('create_existing_and_invalid', () =>
    admin.createTopics({
      topics: [
        { topic, numPartitions: partitions, replicationFactor: 3 },
        { topic: `${topic}-rf4`, numPartitions: 1, replicationFactor: 4 },
      ],
    })
  )

  const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
  const listed = await admin.listTopics()
  const cluster = await admin.describeCluster()

  const producer = client.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
  const messages = [...Array(5).keys()].map(i => ({ key: `k${i}`, value: `v${i}`, partition: 0 }))
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()
  const topicOffsets = await admin.fetchTopicOffsets(topic)

  // A group member reads the 5 records and commits (KafkaJS commits after each batch).
  const consumer = client.consumer({ groupId: group, heartbeatInterval: 300, maxWaitTimeInMs: 200 })
  let read = 0
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({ eachMessage: async () => void read++ })
  const committed = async () => (await admin.fetchOffsets({ groupId: group, topics: [topic] }))[0]
  await waitFor(
    async () => read >= 5 && (await committed()).partitions.some(p => p.partition === 0 && p.offset === '5'),
    TIMEOUT_MS,
    `${group} to commit offset 5 of partition 0`
  )
  const stable = await admin.describeGroups([group])
  await consumer.disconnect()
  const groupOffsets = await committed()
  const groups = await admin.listGroups()

  // KafkaJS retries UNKNOWN_TOPIC_OR_PARTITION (retriable): 8 times with backoff is 40 s.
  const impatient = client.admin({ retry: { retries: 1, initialRetryTime: 50 } })
  await impatient.connect()
  await expectError('fetch_metadata_missing', () => impatient.fetchTopicMetadata({ topics: [missing] }))
  await expectError('fetch_offsets_missing', () => impatient.fetchTopicOffsets(missing))
  await expectError('delete_missing', () => impatient.deleteTopics({ topics: [missing], timeout: 5000 }))
  await impatient.disconnect()

  await admin.deleteTopics({ topics: [topic], timeout: 5000 })
  const listedAfterDelete = await admin.listTopics()
  await expectError('fetch_metadata_deleted', () => admin.fetchTopicMetadata({ topics: [topic] }))
  await admin.disconnect()

  return {
    created,
    created_again: createdAgain,
    metadata: metadata.topics.map(t => ({
      name: t.name,
      partitions: t.partitions
        .map(p => ({
          partition: p.partitionId,
          error_code: p.partitionErrorCode,
          leader: p.leader,
          replicas: p.replicas,
          isr: p.isr,
          offline: p.offlineReplicas,
        }))
        .sort((a, b) => a.partition - b.partition),
    })),
    list_topics: listed,
    describe_cluster: {
      brokers: cluster.brokers.map(b => ({ id: b.nodeId, host: b.host, port: b.port })).sort((a, b) => a.id - b.id),
      controller: cluster.controller,
      cluster_id: cluster.clusterId,
    },
    topic_offsets: topicOffsets
      .map(o => ({ partition: o.partition, low: Number(o.low), high: Number(o.high), offset: Number(o.offset) }))
      .sort((a, b) => a.partition - b.partition),
    group_offsets: groupOffsets.partitions
      .map(p => ({ partition: p.partition, offset: Number(p.offset) }))
      .sort((a, b) => a.partition - b.partition),
    describe_group: stable.groups.map(g => ({
      group: g.groupId,
      state: g.state,
      protocol_type: g.protocolType,
      protocol: g.protocol,
      members: g.members.map(m => ({ client_id: m.clientId, member_id: m.memberId })),
    })),
    list_groups: groups.groups.filter(g => g.groupId === group),
    list_topics_after_delete: listedAfterDelete,
    errors,
  }
})
