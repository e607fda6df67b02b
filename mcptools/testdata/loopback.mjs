// Preloaded into the reference servers that the tests start over HTTP
// (NODE_OPTIONS=--import): a server that listens on a port with no host
// listens on 127.0.0.1 only, so the tests stay on loopback.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || typeof args[0] === "string") && /^\d+$/.test(String(args[0])) && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
