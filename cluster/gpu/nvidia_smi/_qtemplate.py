"""The layout of ``nvidia-smi -q`` for one GPU (driver 580), as recorded on a real H100 (``q.txt``, ``q-*.txt``).

One line per output line. Indentation is four spaces a level below ``GPU <bus id>``. ``Label = value`` prints
``Label`` padded to the value column, then ``: value``; a line without `` = `` is a section heading. ``{key}`` takes
a value from ``details.values`` (a ``--query-gpu`` field or a ``q.`` key); a value made of ``N/A`` alone prints
``N/A`` whatever its unit. ``#GROUP`` on a top-level line names the ``-d`` group that shows it; ``#GROUP!`` is shown
only by ``-d`` (the sample blocks); ``#TRAIL`` keeps the trailing space the real tool prints after that heading.
Literal values are what an idle GPU with no errors printed on both the H100 and the H200.
"""

TEMPLATE = """
Product Name = {name}
Product Brand = {q.brand}
Product Architecture = {q.arch}
Display Mode = Requested functionality has been deprecated
Display Attached = Yes
Display Active = Disabled
Persistence Mode = {persistence_mode}
Addressing Mode = None
MIG Mode
    Current = {mig.mode.current}
    Pending = {mig.mode.pending}
Accounting Mode = Disabled  #ACCOUNTING
Accounting Mode Buffer Size = 4000  #ACCOUNTING
Accounted Processes = None  #ACCOUNTING!
Driver Model
    Current = N/A
    Pending = N/A
Serial Number = {serial}
GPU UUID = {uuid}
GPU PDI = {q.pdi}
Minor Number = {q.minor}
VBIOS Version = {vbios_version}
MultiGPU Board = No
Board ID = {q.board_id}
Board Part Number = {q.board_part}
GPU Part Number = {q.gpu_part}
FRU Part Number = N/A
Platform Info
    Chassis Serial Number = N/A
    Slot Number = N/A
    Tray Index = N/A
    Host ID = N/A
    Peer Type = N/A
    Module Id = {platform.module_id}
    GPU Fabric GUID = N/A
Inforom Version
    Image Version = {inforom.img}
    OEM Object = {inforom.oem}
    ECC Object = {inforom.ecc}
    Power Management Object = N/A
Inforom BBX Object Flush
    Latest Timestamp = N/A
    Latest Duration = N/A
GPU Operation Mode
    Current = N/A
    Pending = N/A
GPU C2C Mode = Disabled
GPU Virtualization Mode
    Virtualization Mode = {q.virtualization}
    Host VGPU Mode = N/A
    vGPU Heterogeneous Mode = N/A
GPU Recovery Action = None
GSP Firmware Version = {driver_version}  #GSP_FIRMWARE_VERSION
IBMNPU
    Relaxed Ordering Mode = N/A
PCI
    Bus = {pci.bus}
    Device = {pci.device}
    Domain = {pci.domain}
    Base Classcode = {pci.baseClass}
    Sub Classcode = {pci.subClass}
    Device Id = {pci.device_id}
    Bus Id = {pci.bus_id}
    Sub System Id = {pci.sub_device_id}
    GPU Link Info
        PCIe Generation
            Max = {pcie.link.gen.max}
            Current = {pcie.link.gen.current}
            Device Current = {pcie.link.gen.gpucurrent}
            Device Max = {pcie.link.gen.gpumax}
            Host Max = N/A
        Link Width
            Max = {pcie.link.width.max}x
            Current = {pcie.link.width.current}x
    Bridge Chip
        Type = N/A
        Firmware = N/A
    Replays Since Reset = 0
    Replay Number Rollovers = 0
    Tx Throughput = {q.tx} KB/s
    Rx Throughput = {q.rx} KB/s
    Atomic Caps Outbound = N/A
    Atomic Caps Inbound = N/A
Fan Speed = N/A
Performance State = {pstate}  #PERFORMANCE
Clocks Event Reasons  #PERFORMANCE
    Idle = Active
    Applications Clocks Setting = Not Active
    SW Power Cap = Not Active
    HW Slowdown = Not Active
        HW Thermal Slowdown = Not Active
        HW Power Brake Slowdown = Not Active
    Sync Boost = Not Active
    SW Thermal Slowdown = Not Active
    Display Clock Setting = Not Active
Clocks Event Reasons Counters  #PERFORMANCE
    SW Power Capping = 0 us
    Sync Boost = 0 us
    SW Thermal Slowdown = 0 us
    HW Thermal Slowdown = 0 us
    HW Power Braking = 0 us
Sparse Operation Mode = Disabled  #PERFORMANCE
FB Memory Usage  #MEMORY
    Total = {memory.total} MiB
    Reserved = {memory.reserved} MiB
    Used = {memory.used} MiB
    Free = {memory.free} MiB
BAR1 Memory Usage  #MEMORY
    Total = {q.bar1_total} MiB
    Used = {q.bar1_used} MiB
    Free = {q.bar1_free} MiB
Conf Compute Protected Memory Usage  #MEMORY
    Total = 0 MiB
    Used = 0 MiB
    Free = 0 MiB
Compute Mode = {compute_mode}  #COMPUTE
Utilization  #UTILIZATION
    GPU = {utilization.gpu} %
    Memory = {utilization.memory} %
    Encoder = 0 %
    Decoder = 0 %
    JPEG = 0 %
    OFA = 0 %
GPU Utilization Samples  #UTILIZATION!
    Duration = {q.samples_duration} sec
    Number of Samples = {q.samples}
    Max = 0 %
    Min = 0 %
    Avg = 0 %
Memory Utilization Samples  #UTILIZATION!
    Duration = {q.samples_duration} sec
    Number of Samples = {q.samples}
    Max = 0 %
    Min = 0 %
    Avg = 0 %
ENC Utilization Samples  #UTILIZATION!
    Duration = {q.samples_duration} sec
    Number of Samples = {q.samples}
    Max = 0 %
    Min = 0 %
    Avg = 0 %
DEC Utilization Samples  #UTILIZATION!
    Duration = {q.samples_duration} sec
    Number of Samples = {q.samples}
    Max = 0 %
    Min = 0 %
    Avg = 0 %
JPG Utilization Samples  #UTILIZATION!
    Duration = {q.samples_duration} sec
    Number of Samples = {q.samples}
    Max = 0 %
    Min = 0 %
    Avg = 0 %
OFA Utilization Samples  #UTILIZATION!
    Duration = {q.samples_duration} sec
    Number of Samples = {q.samples}
    Max = 0 %
    Min = 0 %
    Avg = 0 %
Encoder Stats  #ENCODER_STATS
    Active Sessions = 0
    Average FPS = 0
    Average Latency = 0
FBC Stats  #FBC_STATS
    Active Sessions = 0
    Average FPS = 0
    Average Latency = 0
DRAM Encryption Mode
    Current = N/A
    Pending = N/A
ECC Mode  #ECC
    Current = Enabled
    Pending = Enabled
ECC Errors  #ECC
    Volatile
        SRAM Correctable = 0
        SRAM Uncorrectable Parity = 0
        SRAM Uncorrectable SEC-DED = 0
        DRAM Correctable = 0
        DRAM Uncorrectable = 0
    Aggregate
        SRAM Correctable = 0
        SRAM Uncorrectable Parity = 0
        SRAM Uncorrectable SEC-DED = 0
        DRAM Correctable = 0
        DRAM Uncorrectable = 0
        SRAM Threshold Exceeded = No
    Aggregate Uncorrectable SRAM Sources
        SRAM L2 = 0
        SRAM SM = 0
        SRAM Microcontroller = 0
        SRAM PCIE = 0
        SRAM Other = 0
    Channel Repair Pending = No
    TPC Repair Pending = No
    Unrepairable Memory = No
Retired Pages  #PAGE_RETIREMENT
    Single Bit ECC = N/A
    Double Bit ECC = N/A
    Pending Page Blacklist = N/A
Remapped Rows  #ROW_REMAPPER
    Correctable Error = 0
    Inactive Correctable Error = 0
    Uncorrectable Error = 0
    Inactive Uncorrectable Error = 0
    Pending = No
    Remapping Failure Occurred = No
    Bank Remap Availability Histogram
        Max = {remapped_rows.histogram.max} bank(s)
        High = 0 bank(s)
        Partial = 0 bank(s)
        Low = 0 bank(s)
        None = 0 bank(s)
Temperature  #TEMPERATURE
    GPU Current Temp = {temperature.gpu} C
    GPU T.Limit Temp = {temperature.gpu.tlimit} C
    GPU Shutdown T.Limit Temp = {q.shutdown} C
    GPU Slowdown T.Limit Temp = {q.slowdown} C
    GPU Max Operating T.Limit Temp = {q.max_operating} C
    GPU Target Temperature = N/A
    Memory Current Temp = {temperature.memory} C
    Memory Max Operating T.Limit Temp = {q.max_operating} C
Supported GPU_TARGET_TEMP  #SUPPORTED_GPU_TARGET_TEMP!
    Min = N/A
    Max = N/A
GPU Power Readings  #POWER
    Average Power Draw = {power.draw.average} W
    Instantaneous Power Draw = {power.draw.instant} W
    Current Power Limit = {enforced.power.limit} W
    Requested Power Limit = {power.limit} W
    Default Power Limit = {power.default_limit} W
    Min Power Limit = {power.min_limit} W
    Max Power Limit = {power.max_limit} W
Power Samples  #POWER!
    Duration = {q.power_samples_duration} sec
    Number of Samples = {q.power_samples}
    Max = {power.draw} W
    Min = {power.draw} W
    Avg = {power.draw} W
GPU Memory Power Readings  #POWER #TRAIL
    Average Power Draw = {q.memory_power} W
    Instantaneous Power Draw = N/A
Module Power Readings  #POWER
    Average Power Draw = N/A
    Instantaneous Power Draw = N/A
    Current Power Limit = N/A
    Requested Power Limit = N/A
    Default Power Limit = N/A
    Min Power Limit = N/A
    Max Power Limit = N/A
Power Smoothing = N/A  #POWER_SMOOTHING
Workload Power Profiles  #POWER_PROFILES
    Requested Profiles = N/A
    Enforced Profiles = N/A
Clocks  #CLOCK
    Graphics = {clocks.current.graphics} MHz
    SM = {clocks.current.sm} MHz
    Memory = {clocks.current.memory} MHz
    Video = {clocks.current.video} MHz
Applications Clocks  #CLOCK
    Graphics = {clocks.applications.graphics} MHz
    Memory = {clocks.applications.memory} MHz
Default Applications Clocks  #CLOCK
    Graphics = {clocks.default_applications.graphics} MHz
    Memory = {clocks.default_applications.memory} MHz
Deferred Clocks  #CLOCK
    Memory = N/A
Max Clocks  #CLOCK
    Graphics = {clocks.max.graphics} MHz
    SM = {clocks.max.sm} MHz
    Memory = {clocks.max.memory} MHz
    Video = {q.max_video} MHz
Max Customer Boost Clocks  #CLOCK
    Graphics = {clocks.max.graphics} MHz
SM Clock Samples  #CLOCK!
    Duration = Not Found
    Number of Samples = Not Found
    Max = Not Found
    Min = Not Found
    Avg = Not Found
Memory Clock Samples  #CLOCK!
    Duration = Not Found
    Number of Samples = Not Found
    Max = Not Found
    Min = Not Found
    Avg = Not Found
Clock Policy  #CLOCK
    Auto Boost = N/A
    Auto Boost Default = N/A
Fabric
    State = {fabric.state}
    Status = {fabric.status}
    CliqueId = {fabric.cliqueId}
    ClusterUUID = {fabric.clusterUuid}
    Health
        Summary = N/A
        Bandwidth = N/A
        Route Recovery in progress = N/A
        Route Unhealthy = N/A
        Access Timeout Recovery = N/A
        Incorrect Configuration = N/A
        Partition Assigned = N/A
Processes = None  #PIDS
Capabilities
    EGM = disabled
"""
