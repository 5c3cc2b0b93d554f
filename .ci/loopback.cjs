// Preloaded into server-everything's streamable HTTP mode (NODE_OPTIONS=--require)
// so that it listens on 127.0.0.1 only: it takes a port from PORT but no host.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    const callback = typeof args[args.length - 1] === "function" ? args.pop() : undefined;
    return listen.call(this, { port: Number(args[0]), host: "127.0.0.1" }, callback);
  }
  return listen.apply(this, args);
};
