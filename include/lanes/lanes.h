/* Lanes: collective communication for PCIe-only GPU boxes.
 *
 * NCCL's shape and semantics: same argument order, same in-place rules, same
 * meaning of result codes. Every failure leaves a sentence for
 * lanesGetLastError(comm). Buffers may live in host memory (stream may be
 * NULL) or, with the CUDA data path, in device memory of the communicator's
 * GPU (enqueued on `stream`). */
#ifndef LANES_LANES_H_
#define LANES_LANES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library builds with hidden visibility; everything declared here is the
 * exported API. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define LANES_MAJOR 0
#define LANES_MINOR 1
#define LANES_PATCH 0
#define LANES_VERSION_CODE (LANES_MAJOR * 10000 + LANES_MINOR * 100 + LANES_PATCH)

/* Same type as CUDA's cudaStream_t; redeclaring an identical typedef is legal
 * in C11 and C++, so this header works with or without cuda_runtime.h. */
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

typedef struct lanesComm* lanesComm_t;

/* The enums below hold an int. In C any int is a valid value of them, and
 * Lanes refuses unknown values with lanesInvalidArgument; C++ gets the same
 * contract by a fixed underlying type (without it, casting e.g. -1 to one of
 * them would be undefined behaviour in the caller and in Lanes' own check). */
#ifdef __cplusplus
#define LNS_ENUM_OF_INT : int
#else
#define LNS_ENUM_OF_INT
#endif

#define LANES_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[LANES_UNIQUE_ID_BYTES];
} lanesUniqueId;

typedef enum LNS_ENUM_OF_INT {
  lanesSuccess = 0,
  lanesUnhandledCudaError = 1,
  lanesSystemError = 2,
  lanesInternalError = 3,
  lanesInvalidArgument = 4,
  lanesInvalidUsage = 5,
  lanesRemoteError = 6,
  lanesInProgress = 7,
  lanesTimeout = 8,
  lanesNumResults = 9
} lanesResult_t;

typedef enum LNS_ENUM_OF_INT {
  lanesInt8 = 0,
  lanesChar = 0,
  lanesUint8 = 1,
  lanesInt32 = 2,
  lanesInt = 2,
  lanesUint32 = 3,
  lanesInt64 = 4,
  lanesUint64 = 5,
  lanesFloat16 = 6,
  lanesHalf = 6,
  lanesFloat32 = 7,
  lanesFloat = 7,
  lanesFloat64 = 8,
  lanesDouble = 8,
  lanesBfloat16 = 9,
  lanesFloat8e4m3 = 10,
  lanesFloat8e5m2 = 11,
  lanesNumTypes = 12
} lanesDataType_t;

/* Built-in ops; values from lanesNumOps up are handles returned by
 * lanesRedOpCreatePreMulSum. */
typedef enum LNS_ENUM_OF_INT {
  lanesSum = 0,
  lanesProd = 1,
  lanesMax = 2,
  lanesMin = 3,
  lanesAvg = 4,
  lanesNumOps = 5,
  lanesMaxRedOp = 0x7fffffff
} lanesRedOp_t;

/* Where lanesRedOpCreatePreMulSum reads its scalar. */
typedef enum LNS_ENUM_OF_INT {
  lanesScalarDevice = 0,
  lanesScalarHostImmediate = 1
} lanesScalarResidence_t;

/* How float32 sums cross PCIe and the network (lanesConfig_t.wireFormat, or
 * LANES_WIRE): lossy, opt-in, on the ring only; docs/wire_formats.md bounds
 * the error. lanesWireDefault takes LANES_WIRE (native when unset). */
typedef enum LNS_ENUM_OF_INT {
  lanesWireDefault = 0,
  lanesWireNative = 1,
  lanesWireBf16 = 2,
  lanesWireFp8 = 3
} lanesWireFormat_t;

/* Communicator options. Always start from LANES_CONFIG_INITIALIZER: `size`,
 * `magic` and `version` let later releases add fields without breaking the
 * ABI. A field left at LANES_CONFIG_UNDEF_INT takes its default. */
#define LANES_CONFIG_UNDEF_INT INT32_MIN
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;         /* 1 (default): calls return when done or failed. 0: init may return
                           lanesInProgress. */
  int timeoutSeconds;   /* every wait fails after this many seconds; default LANES_TIMEOUT or 300 */
  const char* commName; /* shown in logs; may be NULL */
  int wireFormat;       /* a lanesWireFormat_t; default LANES_WIRE, else native */
  int reserved[11];
} lanesConfig_t;

#define LANES_CONFIG_MAGIC 0x4c414e45u /* "LANE" */
#define LANES_CONFIG_INITIALIZER                                                           \
  {                                                                                        \
    sizeof(lanesConfig_t), LANES_CONFIG_MAGIC, LANES_VERSION_CODE, LANES_CONFIG_UNDEF_INT, \
        LANES_CONFIG_UNDEF_INT, NULL, LANES_CONFIG_UNDEF_INT, {                            \
      0                                                                                    \
    }                                                                                      \
  }

/* Used as `color` in lanesCommSplit for ranks that want no new communicator. */
#define LANES_SPLIT_NOCOLOR (-1)

lanesResult_t lanesGetVersion(int* version);
const char* lanesGetErrorString(lanesResult_t result);
/* The last error this thread saw on `comm` (or outside any communicator when
 * comm is NULL), as a sentence naming what happened and what to do. Never NULL. */
const char* lanesGetLastError(lanesComm_t comm);

lanesResult_t lanesGetUniqueId(lanesUniqueId* uniqueId);
lanesResult_t lanesCommInitRank(lanesComm_t* comm, int nranks, lanesUniqueId commId, int rank);
lanesResult_t lanesCommInitRankConfig(lanesComm_t* comm, int nranks, lanesUniqueId commId, int rank,
                                      lanesConfig_t* config);
/* ndev ranks as threads of this process; devlist may be NULL (devices 0..ndev-1
 * where GPUs exist, host-only ranks otherwise). An entry of -1 makes that rank
 * host-only even where GPUs exist. */
lanesResult_t lanesCommInitAll(lanesComm_t* comms, int ndev, const int* devlist);
/* Joins the job a launcher started: lanes-run (LANES_RANK, LANES_WORLD_SIZE,
 * LANES_ROOT_ADDR), torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * Open MPI (OMPI_COMM_WORLD_*) or Slurm (SLURM_PROCID, SLURM_NTASKS). No id
 * needs passing: every rank derives it from the environment. An MPI launch
 * (mpirun, srun --mpi=pmix) with no root address takes the id over MPI, as
 * nccl-tests does: MPI_Init unless the program did (then MPI_Finalize at
 * exit), rank 0's id by MPI_Bcast; this needs liblanes-mpi.so, built where
 * MPI was found. config may be NULL. */
lanesResult_t lanesCommInitFromEnv(lanesComm_t* comm, lanesConfig_t* config);
/* Ranks of equal color form a new communicator, ordered by key (then by
 * their rank in comm). It talks over comm's control connections and monitor
 * thread (no socket or thread of its own) and may outlive comm. */
lanesResult_t lanesCommSplit(lanesComm_t comm, int color, int key, lanesComm_t* newcomm,
                             lanesConfig_t* config);
/* Like lanesCommInitRankConfig with several ids (the same nId ids in the same
 * order on every rank). Lanes' bootstrap needs one root: commIds[0] serves the
 * rendezvous, the others are checked and left unused. */
lanesResult_t lanesCommInitRankScalable(lanesComm_t* newcomm, int nranks, int myrank, int nId,
                                        lanesUniqueId* commIds, lanesConfig_t* config);

/* lanesCommShrink flags. ABORT first stops the parent's operations still
 * waiting (as after a peer's death), then shrinks. */
#define LANES_SHRINK_DEFAULT 0x00
#define LANES_SHRINK_ABORT 0x01
/* The ranks of `comm` not in excludeRanksList (every one of them calls this
 * with the same list) form *newcomm, keeping their relative order. Works on a
 * communicator that failed because an excluded rank died. config NULL: the
 * parent's options. */
lanesResult_t lanesCommShrink(lanesComm_t comm, int* excludeRanksList, int excludeRanksCount,
                              lanesComm_t* newcomm, lanesConfig_t* config, int shrinkFlags);
/* Stops this rank's operations in flight on `comm`; afterwards only destroy,
 * abort, split and shrink are allowed. It tells no peer and fails no peer's
 * communicator, but a peer's operation with this rank fails once its
 * connections close: every rank is expected to revoke. revokeFlags must be 0. */
lanesResult_t lanesCommRevoke(lanesComm_t comm, int revokeFlags);
lanesResult_t lanesCommFinalize(lanesComm_t comm);
lanesResult_t lanesCommDestroy(lanesComm_t comm);
lanesResult_t lanesCommAbort(lanesComm_t comm);
lanesResult_t lanesCommGetAsyncError(lanesComm_t comm, lanesResult_t* asyncError);
lanesResult_t lanesCommCount(const lanesComm_t comm, int* count);
lanesResult_t lanesCommCuDevice(const lanesComm_t comm, int* device);
lanesResult_t lanesCommUserRank(const lanesComm_t comm, int* rank);

lanesResult_t lanesRedOpCreatePreMulSum(lanesRedOp_t* op, void* scalar, lanesDataType_t datatype,
                                        lanesScalarResidence_t residence, lanesComm_t comm);
lanesResult_t lanesRedOpDestroy(lanesRedOp_t op, lanesComm_t comm);

lanesResult_t lanesAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             lanesDataType_t datatype, lanesRedOp_t op, lanesComm_t comm,
                             cudaStream_t stream);
lanesResult_t lanesBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             lanesDataType_t datatype, int root, lanesComm_t comm,
                             cudaStream_t stream);
lanesResult_t lanesReduce(const void* sendbuff, void* recvbuff, size_t count,
                          lanesDataType_t datatype, lanesRedOp_t op, int root, lanesComm_t comm,
                          cudaStream_t stream);
/* sendcount elements from each rank; recvbuff holds nranks*sendcount. */
lanesResult_t lanesAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             lanesDataType_t datatype, lanesComm_t comm, cudaStream_t stream);
/* sendbuff holds nranks*recvcount; each rank receives its recvcount block. */
lanesResult_t lanesReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 lanesDataType_t datatype, lanesRedOp_t op, lanesComm_t comm,
                                 cudaStream_t stream);
/* count elements to and from each peer; buffers hold nranks*count. */
lanesResult_t lanesAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            lanesDataType_t datatype, lanesComm_t comm, cudaStream_t stream);
/* recvbuff (nranks*count, significant at root only) gets every rank's sendbuff. */
lanesResult_t lanesGather(const void* sendbuff, void* recvbuff, size_t count,
                          lanesDataType_t datatype, int root, lanesComm_t comm,
                          cudaStream_t stream);
/* sendbuff (nranks*count, significant at root only) is split over the ranks. */
lanesResult_t lanesScatter(const void* sendbuff, void* recvbuff, size_t count,
                           lanesDataType_t datatype, int root, lanesComm_t comm,
                           cudaStream_t stream);
lanesResult_t lanesSend(const void* sendbuff, size_t count, lanesDataType_t datatype, int peer,
                        lanesComm_t comm, cudaStream_t stream);
lanesResult_t lanesRecv(void* recvbuff, size_t count, lanesDataType_t datatype, int peer,
                        lanesComm_t comm, cudaStream_t stream);

lanesResult_t lanesGroupStart(void);
/* Runs the group. Communicators created inside it (lanesCommInitRank*) are
 * joined here: it returns once all of them are ready or one failed. */
lanesResult_t lanesGroupEnd(void);

/* What lanesGroupSimulateEnd predicts. Start from LANES_SIM_INFO_INITIALIZER. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds the group would take */
} lanesSimInfo_t;
#define LANES_SIM_INFO_MAGIC 0x4c53494du /* "LSIM" */
#define LANES_SIM_INFO_INITIALIZER \
  { sizeof(lanesSimInfo_t), LANES_SIM_INFO_MAGIC, LANES_VERSION_CODE, -1.0f }
/* Ends the group like lanesGroupEnd, but runs none of its operations: fills
 * simInfo with the time Lanes' cost model predicts for them on this rank.
 * With simInfo NULL it is lanesGroupEnd (as NCCL). */
lanesResult_t lanesGroupSimulateEnd(lanesSimInfo_t* simInfo);

/* Device memory of the current GPU for buffers of Lanes' calls (cudaMalloc
 * memory; every device path takes it). */
lanesResult_t lanesMemAlloc(void** ptr, size_t size);
lanesResult_t lanesMemFree(void* ptr);

/* Buffer registration: always correct to call, never required. The handle
 * names the buffer until deregistered (or the communicator is destroyed). */
lanesResult_t lanesCommRegister(const lanesComm_t comm, void* buff, size_t size, void** handle);
lanesResult_t lanesCommDeregister(const lanesComm_t comm, void* handle);
typedef struct lanesWindow* lanesWindow_t;
lanesResult_t lanesCommWindowRegister(lanesComm_t comm, void* buff, size_t size, lanesWindow_t* win,
                                      int winFlags);
lanesResult_t lanesCommWindowDeregister(lanesComm_t comm, lanesWindow_t win);

/* Only for the enum declarations above; it does not leak into the user's code. */
#undef LNS_ENUM_OF_INT

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* LANES_LANES_H_ */
