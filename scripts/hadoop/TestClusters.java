// One YARN + HDFS test cluster in this JVM, on fixed loopback ports, for the tests and benches
// (scripts/services.sh builds and starts it; docs/yarn.md). Usage:
//
//   java -cp <classpath> TestClusters <conf dir> <work dir> <control port>
//
// <conf dir> holds the site files scripts/services.sh wrote (core-site, hdfs-site, yarn-site,
// capacity-scheduler): the servers read them, and clients use the same directory as their
// HADOOP_CONF_DIR. Starts one NameNode + one DataNode (MiniDFSCluster; WebHDFS on), one
// ResourceManager (MiniYARNCluster over real RPC, so the NodeManager survives a ResourceManager
// restart) and one NodeManager of our own (MiniYARNCluster's would fix its memory at 4 GB and its
// ports at random ones), then writes <work dir>/ready (start times in ms) and stays up until
// killed (SIGTERM stops the NodeManager's containers too). A control server on 127.0.0.1:<control port> lets tests act on single daemons:
//
//   POST /rm/stop  /rm/start  /rm/restart  (the ResourceManager; recovery brings its apps back)
//   GET  /status                            (which daemons run)
import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;

public final class TestClusters {
    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable e) {
            // the test clusters' own threads would keep a JVM that failed to start alive
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        long t0 = System.currentTimeMillis();
        File confDir = new File(args[0]);
        File work = new File(args[1]);
        int controlPort = Integer.parseInt(args[2]);
        Configuration conf = new YarnConfiguration();
        for (String site : new String[] {"core-site", "hdfs-site", "yarn-site", "capacity-scheduler"}) {
            conf.addResource(new Path(new File(confDir, site + ".xml").getAbsolutePath()));
        }
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(work, "dfs").getAbsolutePath());
        MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf)
                .nameNodePort(Integer.parseInt(conf.get("drover.test.namenode.port")))
                .nameNodeHttpPort(Integer.parseInt(conf.get("drover.test.namenode.http.port")))
                .numDataNodes(1)
                .checkDataNodeAddrConfig(true)
                .format(true)
                .build();
        dfs.waitActive();
        long dfsUp = System.currentTimeMillis();

        // Hadoop's test utilities put their work directory under test.build.data
        System.setProperty("test.build.data", new File(work, "yarn").getAbsolutePath());
        MiniYARNCluster yarn = new MiniYARNCluster("drover", 0, 1, 1);
        yarn.init(conf);
        yarn.start();
        // the known race of Hadoop's test clusters: the address is set once the RM listens
        long deadline = System.currentTimeMillis() + 60_000;
        while (yarn.getConfig().get(YarnConfiguration.RM_ADDRESS, ":0").endsWith(":0")) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("RM has no address");
            Thread.sleep(50);
        }
        NodeManager nm = new NodeManager();
        nm.init(new YarnConfiguration(conf));
        nm.start();
        while (yarn.getResourceManager(0).getRMContext().getRMNodes().isEmpty()) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no NodeManager");
            Thread.sleep(50);
        }
        long yarnUp = System.currentTimeMillis();

        // SIGTERM: the NodeManager kills its containers (they run in sessions of their own and
        // would outlive this JVM), then the ResourceManager and HDFS stop
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            synchronized (TestClusters.class) {
                nm.stop();
                yarn.stopResourceManager(0);
                dfs.shutdown();
            }
        }));

        HttpServer control = HttpServer.create(new InetSocketAddress("127.0.0.1", controlPort), 0);
        control.createContext("/", exchange -> {
            String path = exchange.getRequestURI().getPath();
            int code = 200;
            String body;
            try {
                synchronized (TestClusters.class) {
                    if (path.equals("/status")) {
                        boolean rm = yarn.getResourceManager(0) != null;
                        body = "{\"resourcemanager\": " + rm + "}";
                    } else if (!exchange.getRequestMethod().equals("POST")) {
                        code = 405;
                        body = "POST only";
                    } else if (path.equals("/rm/stop")) {
                        yarn.stopResourceManager(0);
                        body = "stopped";
                    } else if (path.equals("/rm/start") || path.equals("/rm/restart")) {
                        yarn.restartResourceManager(0);
                        body = "started";
                    } else {
                        code = 404;
                        body = "unknown: " + path;
                    }
                }
            } catch (Exception e) {
                code = 500;
                body = e.toString();
            }
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(code, bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        });
        control.start();

        String ready = String.format("started_ms=%d%nhdfs_ms=%d%nyarn_ms=%d%n", t0, dfsUp - t0, yarnUp - dfsUp);
        Files.writeString(new File(work, "ready.tmp").toPath(), ready);
        new File(work, "ready.tmp").renameTo(new File(work, "ready"));
        System.out.println("[test-clusters] ready: HDFS in " + (dfsUp - t0) + " ms, YARN in "
                + (yarnUp - dfsUp) + " ms");
        Thread.currentThread().join();  // until killed
    }
}
