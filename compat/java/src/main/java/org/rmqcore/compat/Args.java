/*
 * Command-line options of the harness programs: "--name value" pairs, with typed getters and defaults.
 * An unknown shape (a value without a name, a name without a value) is a usage error. Not thread-safe; read once in main.
 */
package org.rmqcore.compat;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.remoting.RPCHook;

final class Args {
    private final Map<String, String> values = new LinkedHashMap<>();

    Args(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value pairs, got '" + a + "'");
            }
            values.put(a.substring(2), argv[++i]);
        }
    }

    String str(String name, String dflt) {
        String v = values.get(name);
        if (v == null && dflt == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v == null ? dflt : v;
    }

    String str(String name) {
        return str(name, null);
    }

    int integer(String name, int dflt) {
        String v = values.get(name);
        return v == null ? dflt : Integer.parseInt(v);
    }

    long lng(String name, long dflt) {
        String v = values.get(name);
        return v == null ? dflt : Long.parseLong(v);
    }

    /**
     * AclClientRPCHook of --access-key/--secret-key (RocketMQ 4.9's ACL), or null when not given. Loaded by name:
     * rocketmq-acl is on the class path of the 4.9.7 build only (pom.xml's acl profile).
     */
    RPCHook rpcHook() {
        String ak = values.get("access-key");
        if (ak == null) {
            return null;
        }
        try {
            Class<?> credentials = Class.forName("org.apache.rocketmq.acl.common.SessionCredentials");
            Object c = credentials.getConstructor(String.class, String.class).newInstance(ak, str("secret-key"));
            Class<?> hook = Class.forName("org.apache.rocketmq.acl.common.AclClientRPCHook");
            return (RPCHook) hook.getConstructor(credentials).newInstance(c);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("--access-key needs rocketmq-acl on the class path (the 4.9.7 build)", e);
        }
    }

    boolean flag(String name) {
        return Boolean.parseBoolean(values.getOrDefault(name, "false"));
    }
}
