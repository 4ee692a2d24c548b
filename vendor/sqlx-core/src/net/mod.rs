mod socket;
#[cfg(feature = "_rt-tokio")]
mod severable;
pub mod tls;

pub use socket::{
    connect_tcp, connect_uds, BufferedSocket, Socket, SocketIntoBox, WithSocket, WriteBuffer,
};
#[cfg(feature = "_rt-tokio")]
pub use severable::sever_tcp;
