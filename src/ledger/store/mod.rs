//! The one handle on the ledger's database, and the statements that differ by engine.
//!
//! The engine (plain PostgreSQL or a Citus coordinator) is detected once, where a command opens
//! its pool, and travels with the pool as a [`Store`]; code inside a transaction gets it from
//! the [`Db`] it was handed, never from a parameter of its own or a catalog probe. A statement
//! that needs another form on Citus is written once here, both forms side by side in one
//! function (`match engine { Engine::Plain => .., Engine::Citus => .. }`), in the module of its
//! concern: [`locks`] (row locks), [`inserts`] (the write path's inserts), [`reads`] (reads that
//! answer a write's question), [`checkpoints`] (system accounts' balance checkpoints).

pub mod checkpoints;
pub mod inserts;
pub mod locks;
pub mod marks;
mod per_shard;
pub mod reads;
pub mod sessions;
pub mod shards;

use crate::db::{Database, Engine};
use crate::ledger::Outcome;
use sqlx::{PgConnection, PgPool};

/// `transactions.creation_outcome` of a created resource, and of a refusal: the words the
/// schema's check allows, spelled once for the insert and the read.
const CREATED: &str = "created";
const REFUSED: &str = "refused";

/// The `creation_outcome` an outcome is stored as.
fn outcome_column(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Created { .. } => CREATED,
        Outcome::Refused(_) => REFUSED,
    }
}

/// The `creation_response` an outcome stores: a creation's body; a refusal's exact answer
/// only if it was stored before the outcome was (its answer is rendered from the row since).
fn response_column(outcome: &Outcome) -> Option<&str> {
    match outcome {
        Outcome::Created { body } => Some(body),
        Outcome::Refused(refusal) => refusal.recorded_answer.as_deref(),
    }
}

/// The pool and the engine it talks to, decided once when the pool opened. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    engine: Engine,
}

impl Store {
    pub fn new(pool: PgPool, engine: Engine) -> Store {
        Store { pool, engine }
    }

    /// The store of a connected [`Database`] (its engine was detected when it connected).
    pub fn of(database: &Database) -> Store {
        Store::new(database.pool.clone(), database.engine)
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// `conn` (a pooled connection or a transaction on one) seen as this store's.
    pub fn on<'c>(&self, conn: &'c mut PgConnection) -> Db<'c> {
        Db::new(conn, self.engine)
    }
}

/// A connection, or a transaction on one, that knows its engine: one parameter where a
/// function would otherwise take a connection and the engine beside it.
pub struct Db<'c> {
    conn: &'c mut PgConnection,
    engine: Engine,
}

impl<'c> Db<'c> {
    pub fn new(conn: &'c mut PgConnection, engine: Engine) -> Db<'c> {
        Db { conn, engine }
    }

    pub fn conn(&mut self) -> &mut PgConnection {
        self.conn
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }
}
