package dev.paylab.peers.debezium;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.ChangeEvent;

/**
 * The Debezium contender of paylab's peer benchmark: Debezium's embedded engine
 * with its PostgreSQL connector (pgoutput) and its outbox EventRouter, each batch
 * sent to Kafka with a plain KafkaProducer, as a careful user would write it.
 *
 * <pre>
 * java -jar paylab-debezium-peer.jar init  --host H --port P --database D --user U --password W
 *      --slot S --publication PUB --table T --offsets-dir DIR
 * java -jar paylab-debezium-peer.jar drain (the same) --topic TOPIC --brokers B --events N
 * </pre>
 *
 * init starts the connector once, so that it creates the replication slot and the
 * publication, waits until it streams from the slot, and stops. drain starts a fresh
 * engine on that slot and stops once N events are acknowledged by Kafka. Each prints
 * one JSON object on stdout; logs go to stderr, at WARN unless told otherwise.
 */
public final class Main {
    static {
        // Before any logger exists: slf4j-simple reads these once.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
    }

    private Main() {
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            usage("no mode");
        }
        Flags f = Flags.parse(args);
        try {
            switch (args[0]) {
                case "init" -> System.out.println(init(f));
                case "drain" -> System.out.println(drain(f));
                default -> usage("unknown mode " + args[0]);
            }
        }
        catch (Throwable t) {
            System.err.println("debezium peer " + args[0] + ": " + t);
            t.printStackTrace(System.err);
            System.out.flush();
            System.exit(1);
        }
        System.out.flush();
        // The engine's and the producer's threads are stopped; a library's
        // leftover non-daemon thread must not keep the process alive.
        System.exit(0);
    }

    private static void usage(String why) {
        System.err.println("usage: paylab-debezium-peer init|drain --host H --port P --database D --user U --password W "
                + "--slot S --publication PUB --table T --offsets-dir DIR [--topic T --brokers B --events N] (" + why + ")");
        System.exit(2);
    }

    /** The connector's configuration, common to both modes. */
    static Properties connector(Flags f, String name) {
        Properties p = new Properties();
        p.setProperty("name", name);
        p.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        p.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        p.setProperty("offset.storage.file.filename", Path.of(f.get("offsets-dir"), "offsets.dat").toString());
        // Offsets are flushed (and the slot's position confirmed) after every
        // batch the consumer finished, not once a minute.
        p.setProperty("offset.flush.interval.ms", f.get("offset-flush-ms", "0"));
        p.setProperty("database.hostname", f.get("host"));
        p.setProperty("database.port", f.get("port"));
        p.setProperty("database.user", f.get("user"));
        p.setProperty("database.password", f.get("password"));
        p.setProperty("database.dbname", f.get("database"));
        p.setProperty("topic.prefix", "paylab");
        p.setProperty("plugin.name", "pgoutput");
        p.setProperty("slot.name", f.get("slot"));
        p.setProperty("slot.drop.on.stop", "false");
        p.setProperty("publication.name", f.get("publication"));
        p.setProperty("publication.autocreate.mode", "filtered");
        p.setProperty("table.include.list", qualified(f.get("table")));
        p.setProperty("snapshot.mode", "no_data");
        p.setProperty("tombstones.on.delete", "false");
        // No __debezium.context.* headers on every record: the events carry
        // the headers of the outbox's columns, as paylab's do.
        p.setProperty("extended.headers.enabled", "false");
        return p;
    }

    static String qualified(String table) {
        return table.contains(".") ? table : "public." + table;
    }

    /** init: create the slot and the publication by starting the connector once. */
    static String init(Flags f) throws Exception {
        String slot = f.get("slot");
        AtomicReference<Throwable> failed = new AtomicReference<>();
        CountDownLatch completed = new CountDownLatch(1);
        CountDownLatch polling = new CountDownLatch(1);
        DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine = DebeziumEngine.create(Connect.class)
                .using(connector(f, "paylab-debezium-init"))
                .using((success, message, error) -> {
                    if (!success) {
                        failed.set(error != null ? error : new IllegalStateException(message));
                    }
                    completed.countDown();
                })
                .using(new DebeziumEngine.ConnectorCallback() {
                    @Override
                    public void pollingStarted() {
                        polling.countDown();
                    }
                })
                // Nothing is written to the table before init ends; whatever
                // came would be left unacknowledged, for drain to read.
                .notifying((records, committer) -> {
                })
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        try {
            // Streaming has started once the task polls (the engine refuses
            // to stop a task still starting) and a walsender holds the slot.
            long timeout = Long.parseLong(f.get("timeout", "120"));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeout);
            while (polling.getCount() > 0 || !slotActive(f)) {
                if (completed.await(200, TimeUnit.MILLISECONDS)) {
                    throw new IllegalStateException("the engine stopped before streaming", failed.get());
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("slot " + slot + " not streaming after " + timeout + " s");
                }
            }
        }
        finally {
            engine.close();
            executor.shutdown();
            executor.awaitTermination(1, TimeUnit.MINUTES);
        }
        if (failed.get() != null) {
            throw new IllegalStateException("the engine failed", failed.get());
        }
        return "{\"slot\":" + quote(slot) + "}";
    }

    /** slotActive: the slot exists and a walsender streams from it. */
    static boolean slotActive(Flags f) throws SQLException {
        String url = "jdbc:postgresql://" + f.get("host") + ":" + f.get("port") + "/" + f.get("database");
        try (Connection c = DriverManager.getConnection(url, f.get("user"), f.get("password"));
                PreparedStatement s = c.prepareStatement(
                        "SELECT active FROM pg_replication_slots WHERE slot_name = ? AND database = current_database()")) {
            s.setString(1, f.get("slot"));
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() && rs.getBoolean(1);
            }
        }
    }

    /** drain: route the outbox's rows to the topic until N events are acknowledged. */
    static String drain(Flags f) throws Exception {
        final long events = Long.parseLong(f.get("events"));
        Properties p = connector(f, "paylab-debezium-drain");
        p.setProperty("transforms", "outbox");
        p.setProperty("transforms.outbox.type", "io.debezium.transforms.outbox.EventRouter");
        // The documented outbox columns (id, aggregatetype, aggregateid, type,
        // payload) are the router's defaults; every row goes to the one topic.
        p.setProperty("transforms.outbox.route.topic.replacement", f.get("topic"));
        p.setProperty("transforms.outbox.table.fields.additional.placement", f.get("headers", DEFAULT_HEADERS));

        Properties kp = new Properties();
        kp.setProperty(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, f.get("brokers"));
        kp.setProperty(ProducerConfig.ACKS_CONFIG, "all");
        kp.setProperty(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        kp.setProperty(ProducerConfig.CLIENT_ID_CONFIG, "paylab-debezium-peer");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(kp, new ByteArraySerializer(), new ByteArraySerializer());

        Drain d = new Drain(producer, events);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        CountDownLatch completed = new CountDownLatch(1);
        DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine = DebeziumEngine.create(Connect.class)
                .using(p)
                .using((success, message, error) -> {
                    if (!success) {
                        failed.set(error != null ? error : new IllegalStateException(message));
                    }
                    completed.countDown();
                })
                .notifying(d)
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        long timeout = Long.parseLong(f.get("timeout", "1800"));
        d.start();
        executor.execute(engine);
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeout);
            while (!d.done.await(100, TimeUnit.MILLISECONDS)) {
                if (completed.getCount() == 0) {
                    throw new IllegalStateException("the engine stopped after " + d.acked + " of " + events + " events", failed.get());
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(d.acked + " of " + events + " events acknowledged after " + timeout + " s");
                }
            }
        }
        finally {
            engine.close();
            executor.shutdown();
            executor.awaitTermination(1, TimeUnit.MINUTES);
            producer.close();
        }
        double seconds = (d.endNanos - d.startNanos) / 1e9;
        double cpu = (d.endCpu - d.startCpu) / 1e9;
        return String.format(Locale.ROOT,
                "{\"events\":%d,\"seconds\":%.6f,\"per_second\":%.3f,\"jvm_cpu_seconds\":%.6f,\"batches\":%d,\"first_record_seconds\":%.6f}",
                d.acked, seconds, d.acked / seconds, cpu, d.batches, (d.firstNanos - d.startNanos) / 1e9);
    }

    /**
     * The eleven header columns of the outbox table and the Kafka headers they
     * become: the CloudEvents attributes and the W3C trace context paylab's
     * relay sets.
     */
    static final String DEFAULT_HEADERS = String.join(",",
            "ce_specversion:header:ce_specversion",
            "ce_id:header:ce_id",
            "ce_source:header:ce_source",
            "ce_type:header:ce_type",
            "ce_time:header:ce_time",
            "ce_subject:header:ce_subject",
            "ce_sequence:header:ce_sequence",
            "ce_schemaversion:header:ce_schemaversion",
            "ce_aggregatetype:header:ce_aggregatetype",
            "content_type:header:content-type",
            "traceparent:header:traceparent");

    /**
     * The change consumer: a batch is sent whole, then every send is awaited;
     * only then are its records marked processed and the batch finished, which
     * commits their offsets. A failed send fails the batch, whose offsets stay
     * uncommitted, and stops the engine.
     */
    static final class Drain implements DebeziumEngine.ChangeConsumer<ChangeEvent<SourceRecord, SourceRecord>> {
        private final KafkaProducer<byte[], byte[]> producer;
        private final long target;
        final CountDownLatch done = new CountDownLatch(1);
        volatile long acked;
        long batches;
        long startNanos, startCpu, firstNanos, endNanos, endCpu;

        Drain(KafkaProducer<byte[], byte[]> producer, long target) {
            this.producer = producer;
            this.target = target;
        }

        void start() {
            startCpu = cpuNanos();
            startNanos = System.nanoTime();
        }

        @Override
        public void handleBatch(List<ChangeEvent<SourceRecord, SourceRecord>> records,
                                DebeziumEngine.RecordCommitter<ChangeEvent<SourceRecord, SourceRecord>> committer)
                throws InterruptedException {
            if (batches++ == 0) {
                firstNanos = System.nanoTime();
            }
            List<Future<RecordMetadata>> sent = new ArrayList<>(records.size());
            for (ChangeEvent<SourceRecord, SourceRecord> r : records) {
                SourceRecord sr = r.value(); // the Connect format: the record itself, routed
                if (sr.value() == null) {
                    continue; // tombstones: the outbox has none to send
                }
                RecordHeaders headers = new RecordHeaders();
                for (Header h : sr.headers()) {
                    headers.add(h.key(), bytes(h.value()));
                }
                sent.add(producer.send(new ProducerRecord<>(sr.topic(), sr.kafkaPartition(), bytes(sr.key()), bytes(sr.value()), headers)));
            }
            for (Future<RecordMetadata> s : sent) {
                try {
                    s.get();
                }
                catch (ExecutionException e) {
                    throw new IllegalStateException("Kafka did not acknowledge a record", e.getCause());
                }
            }
            for (ChangeEvent<SourceRecord, SourceRecord> r : records) {
                committer.markProcessed(r);
            }
            committer.markBatchFinished();
            long n = acked + sent.size();
            acked = n;
            if (n >= target && done.getCount() > 0) {
                endNanos = System.nanoTime();
                endCpu = cpuNanos();
                done.countDown();
            }
        }
    }

    /** bytes encodes a key, value or header as Connect's string and byte-array converters would. */
    static byte[] bytes(Object o) {
        if (o == null) {
            return null;
        }
        if (o instanceof byte[] b) {
            return b;
        }
        if (o instanceof ByteBuffer bb) {
            byte[] b = new byte[bb.remaining()];
            bb.duplicate().get(b);
            return b;
        }
        return o.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** cpuNanos is the CPU time of the whole JVM: every thread, the JIT's and the GC's too. */
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    }
                    else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    /** Flags: --name value or --name=value. */
    static final class Flags {
        private final Map<String, String> values = new HashMap<>();

        static Flags parse(String[] args) {
            Flags f = new Flags();
            for (int i = 1; i < args.length; i++) {
                String a = args[i];
                if (!a.startsWith("--")) {
                    usage("unexpected argument " + a);
                }
                a = a.substring(2);
                int eq = a.indexOf('=');
                if (eq >= 0) {
                    f.values.put(a.substring(0, eq), a.substring(eq + 1));
                }
                else if (i + 1 < args.length) {
                    f.values.put(a, args[++i]);
                }
                else {
                    usage("flag --" + a + " has no value");
                }
            }
            return f;
        }

        String get(String name) {
            String v = values.get(name);
            if (v == null || v.isEmpty()) {
                usage("missing --" + name);
            }
            return v;
        }

        String get(String name, String def) {
            return values.getOrDefault(name, def);
        }
    }
}
